package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// rsvcGVR is the one API version this plugin reads.
var rsvcGVR = routingv1alpha1.GroupVersion.WithResource("routingservices")

// clients are the plugin's connections to the cluster: RoutingServices are read as unstructured
// through the dynamic client (no scheme to register, and a clear message when the CRD is missing
// or served at another version); ReplicaSets, Jobs and Pods through the typed clientset.
type clients struct {
	dyn   dynamic.Interface
	kube  kubernetes.Interface
	disco discovery.DiscoveryInterface
}

func newClients(flags *genericclioptions.ConfigFlags) (*clients, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{dyn: dyn, kube: kube, disco: disco}, nil
}

// errCRDMissing says the group is not served at all.
var errCRDMissing = errors.New("the RoutingService CRD is not installed in this cluster " +
	"(no API group " + routingv1alpha1.GroupVersion.Group + "): install schemagate's CRD first, e.g. `kubectl apply --server-side -k config/crd`")

// checkAPI makes sure the cluster serves routingservices in routing.schemagate.io/v1alpha1, and
// otherwise says plainly what it serves instead.
func (c *clients) checkAPI(ctx context.Context) error {
	gv := routingv1alpha1.GroupVersion.String()
	list, err := c.disco.ServerResourcesForGroupVersion(gv)
	if err == nil {
		for _, r := range list.APIResources {
			if r.Name == rsvcGVR.Resource {
				return nil
			}
		}
		return errCRDMissing
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot ask the cluster which APIs it serves: %w", err)
	}
	groups, gerr := c.disco.ServerGroups()
	if gerr != nil {
		return fmt.Errorf("cannot ask the cluster which APIs it serves: %w", gerr)
	}
	for _, g := range groups.Groups {
		if g.Name != routingv1alpha1.GroupVersion.Group {
			continue
		}
		var versions []string
		for _, v := range g.Versions {
			versions = append(versions, v.Version)
		}
		return fmt.Errorf("this plugin reads %s; the cluster serves %s %s: upgrade the plugin",
			gv, g.Name, strings.Join(versions, ", "))
	}
	return errCRDMissing
}

// notFoundError is a RoutingService that is not in the namespace asked for.
type notFoundError struct {
	namespace, name string
	elsewhere       []string
}

func (e *notFoundError) Error() string {
	msg := fmt.Sprintf("RoutingService %q not found in namespace %q", e.name, e.namespace)
	switch len(e.elsewhere) {
	case 0:
		return msg + " (`kubectl schemagate list -A` lists every RoutingService)"
	case 1:
		return msg + fmt.Sprintf("; there is one in namespace %q: add -n %s", e.elsewhere[0], e.elsewhere[0])
	}
	return msg + fmt.Sprintf("; there are RoutingServices of that name in namespaces %s: add -n NAMESPACE", strings.Join(e.elsewhere, ", "))
}

// get reads one RoutingService, as unstructured and as the typed struct.
func (c *clients) get(ctx context.Context, ns, name string) (*unstructured.Unstructured, *routingv1alpha1.RoutingService, error) {
	if err := c.checkAPI(ctx); err != nil {
		return nil, nil, err
	}
	u, err := c.dyn.Resource(rsvcGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, c.notFound(ctx, ns, name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read RoutingService %s/%s: %w", ns, name, err)
	}
	r, err := toTyped(u)
	if err != nil {
		return nil, nil, err
	}
	return u, r, nil
}

// notFound builds the NotFound error, naming the other namespaces where a RoutingService of
// that name exists (when the user may list them).
func (c *clients) notFound(ctx context.Context, ns, name string) error {
	e := &notFoundError{namespace: ns, name: name}
	list, err := c.dyn.Resource(rsvcGVR).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err == nil {
		for _, u := range list.Items {
			if u.GetName() == name && u.GetNamespace() != ns {
				e.elsewhere = append(e.elsewhere, u.GetNamespace())
			}
		}
		sort.Strings(e.elsewhere)
	}
	return e
}

// toTyped converts a RoutingService read as unstructured into the v1alpha1 struct.
func toTyped(u *unstructured.Unstructured) (*routingv1alpha1.RoutingService, error) {
	r := &routingv1alpha1.RoutingService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, r); err != nil {
		return nil, fmt.Errorf("cannot read RoutingService %s/%s as %s (is this plugin older than the cluster's schemagate?): %w",
			u.GetNamespace(), u.GetName(), routingv1alpha1.GroupVersion, err)
	}
	return r, nil
}

// nameSelector selects what schemagate made for the RoutingService name.
func nameSelector(name string) string {
	return labels.Set{rollout.LabelName: name}.String()
}

// objects lists the ReplicaSets, Jobs and Pods labelled for the RoutingService.
func (c *clients) objects(ctx context.Context, ns, name string) (Objects, error) {
	opts := metav1.ListOptions{LabelSelector: nameSelector(name)}
	var o Objects
	rss, err := c.kube.AppsV1().ReplicaSets(ns).List(ctx, opts)
	if err != nil {
		return o, fmt.Errorf("cannot list the ReplicaSets of %s/%s: %w", ns, name, err)
	}
	jobs, err := c.kube.BatchV1().Jobs(ns).List(ctx, opts)
	if err != nil {
		return o, fmt.Errorf("cannot list the Jobs of %s/%s: %w", ns, name, err)
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return o, fmt.Errorf("cannot list the Pods of %s/%s: %w", ns, name, err)
	}
	o.ReplicaSets, o.Jobs, o.Pods = rss.Items, jobs.Items, pods.Items
	return o, nil
}
