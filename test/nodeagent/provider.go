package nodeagent

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// provider is one Node's virtual-kubelet provider (node.PodLifecycleHandler and
// node.PodNotifier): it runs the pods bound to its Node as local processes.
type provider struct {
	a        *Agent
	nodeName string
	recorder record.EventRecorder

	mu     sync.Mutex
	pods   map[string]*pod // by namespace/name
	notify func(*corev1.Pod)
}

func newProvider(a *Agent, nodeName string, recorder record.EventRecorder) *provider {
	prov := &provider{a: a, nodeName: nodeName, recorder: recorder, pods: map[string]*pod{}}
	prov.notify = func(*corev1.Pod) {}
	return prov
}

// CreatePod starts a pod's containers, each as a process on the pod's own loopback address.
func (prov *provider) CreatePod(_ context.Context, obj *corev1.Pod) error {
	if len(obj.Spec.EphemeralContainers) > 0 {
		return errdefs.InvalidInput("ephemeral containers are not supported by the node agent")
	}
	key := obj.Namespace + "/" + obj.Name
	prov.mu.Lock()
	old := prov.pods[key]
	prov.mu.Unlock()
	if old != nil {
		if old.obj.UID == obj.UID {
			return nil
		}
		// A new pod of the same name: the old one is gone from the API, so are its processes.
		old.terminate(0, false)
	}
	ip, err := prov.a.ips.allocate(key + "/" + string(obj.UID))
	if err != nil {
		return err
	}
	p, err := newPod(prov, obj, ip)
	if err != nil {
		prov.a.ips.release(ip, key+"/"+string(obj.UID))
		return err
	}
	prov.mu.Lock()
	if prov.a.stopped() {
		prov.mu.Unlock()
		prov.a.ips.release(ip, p.owner)
		return errors.New("the node agent is stopping")
	}
	prov.pods[key] = p
	prov.mu.Unlock()
	p.start()
	return nil
}

// UpdatePod takes new metadata; a running container is not changed (its image is ignored).
func (prov *provider) UpdatePod(_ context.Context, obj *corev1.Pod) error {
	p := prov.get(obj.Namespace, obj.Name)
	if p == nil || p.obj.UID != obj.UID {
		return errdefs.NotFoundf("pod %s/%s is not running here", obj.Namespace, obj.Name)
	}
	p.update(obj)
	return nil
}

// DeletePod starts a pod's termination and returns: SIGTERM, the grace period, SIGKILL, a
// final status, then the pod's removal from the API.
func (prov *provider) DeletePod(_ context.Context, obj *corev1.Pod) error {
	p := prov.get(obj.Namespace, obj.Name)
	if p == nil || p.obj.UID != obj.UID {
		return errdefs.NotFoundf("pod %s/%s is not running here", obj.Namespace, obj.Name)
	}
	p.update(obj)
	// A pod still in the API is being deleted with a grace period; one already gone from it
	// (force-deleted) gets the kubelet's minimum of 2 s.
	grace, fromAPI := 2*time.Second, obj.DeletionTimestamp != nil
	if fromAPI {
		grace = podGrace(obj)
	}
	go p.terminate(grace, fromAPI)
	return nil
}

// podGrace is a pod's grace period: the deletion's, else the spec's, else 30 s.
func podGrace(obj *corev1.Pod) time.Duration {
	switch {
	case obj.DeletionGracePeriodSeconds != nil:
		return time.Duration(*obj.DeletionGracePeriodSeconds) * time.Second
	case obj.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*obj.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// GetPod returns the pod with its current status.
func (prov *provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	if p := prov.get(namespace, name); p != nil {
		return p.snapshot(), nil
	}
	return nil, errdefs.NotFoundf("pod %s/%s is not running here", namespace, name)
}

// GetPodStatus returns the pod's current status.
func (prov *provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	obj, err := prov.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &obj.Status, nil
}

// GetPods returns every pod on this Node.
func (prov *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, p := range prov.list() {
		out = append(out, p.snapshot())
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's callback for status changes.
func (prov *provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	prov.mu.Lock()
	defer prov.mu.Unlock()
	prov.notify = cb
}

func (prov *provider) notifyPod(obj *corev1.Pod) {
	prov.mu.Lock()
	cb := prov.notify
	prov.mu.Unlock()
	cb(obj)
}

func (prov *provider) get(namespace, name string) *pod {
	prov.mu.Lock()
	defer prov.mu.Unlock()
	return prov.pods[namespace+"/"+name]
}

func (prov *provider) list() []*pod {
	prov.mu.Lock()
	defer prov.mu.Unlock()
	out := make([]*pod, 0, len(prov.pods))
	for _, p := range prov.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

func (prov *provider) remove(p *pod) {
	prov.mu.Lock()
	defer prov.mu.Unlock()
	if prov.pods[p.key] == p {
		delete(prov.pods, p.key)
	}
}

// stopAll ends every pod for Stop: SIGTERM, then SIGKILL after grace; nothing is written to
// the API.
func (prov *provider) stopAll(grace time.Duration) {
	prov.mu.Lock()
	prov.notify = func(*corev1.Pod) {}
	prov.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range prov.list() {
		wg.Add(1)
		go func() { defer wg.Done(); p.terminate(grace, false) }()
	}
	wg.Wait()
}
