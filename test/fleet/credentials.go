package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/schemagate/schemagate/test/spoke"
)

// KubeconfigKey is the key of the hub Secret <cluster>-kubeconfig that holds a spoke's
// kubeconfig (Cluster API's convention).
const KubeconfigKey = "value"

// KubeconfigSecretName is the hub Secret holding cluster's kubeconfig: <cluster>-kubeconfig.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// Credentials are the hub's credentials for one namespace of a region: ServiceAccount
// schemagate-hub's token from one token Secret.
type Credentials struct {
	Region    *Region
	Namespace string
	// TokenSecret is the region's Secret the token comes from; deleting it revokes the token.
	TokenSecret string
	Token       string
	// CA is the region's CA certificate (PEM), from the token Secret's ca.crt.
	CA []byte
	// Kubeconfig is a complete kubeconfig: server https://<the region's Proxy>, the CA inline,
	// the bearer token inline; its context's namespace is Namespace. No exec plugin, no files.
	Kubeconfig []byte
}

// SpokeCredentials creates namespace in the region if missing, applies config/spoke into it
// (`kubectl apply -f -` of its kustomize build with that namespace), waits (at most 30 s) for
// kube-controller-manager to fill in the token Secret, and returns the credentials.
func (r *Region) SpokeCredentials(ctx context.Context, namespace string) (*Credentials, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := r.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	manifest, err := spoke.Manifest(namespace)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, r.kubectl, "--kubeconfig", r.Kubeconfig, "apply", "--server-side", "-f", "-")
	cmd.Stdin = bytes.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kubectl apply config/spoke in %s: %v: %s", namespace, err, out)
	}
	return r.credentialsFrom(ctx, namespace, spoke.TokenSecret)
}

// credentialsFrom waits for the token Secret name to carry a token and builds the credentials.
func (r *Region) credentialsFrom(ctx context.Context, namespace, name string) (*Credentials, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := r.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0 && len(s.Data[corev1.ServiceAccountRootCAKey]) > 0 {
			c := &Credentials{Region: r, Namespace: namespace, TokenSecret: name,
				Token: string(s.Data[corev1.ServiceAccountTokenKey]), CA: s.Data[corev1.ServiceAccountRootCAKey]}
			c.Kubeconfig, err = c.kubeconfig()
			return c, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("token Secret %s/%s has no token after 30s (err %v)", namespace, name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Credentials) kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	name := c.Region.Name
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + c.Region.Proxy.Addr(), CertificateAuthorityData: c.CA}
	cfg.AuthInfos[spoke.ServiceAccount] = &clientcmdapi.AuthInfo{Token: c.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: spoke.ServiceAccount, Namespace: c.Namespace}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// RESTConfig is the kubeconfig as a rest.Config (through the Proxy, as the hub connects).
func (c *Credentials) RESTConfig() (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
}

// WriteSecret creates or updates the hub Secret <clusterName>-kubeconfig in hubNamespace, key
// value = the kubeconfig (other keys are dropped).
func (c *Credentials) WriteSecret(ctx context.Context, hub kubernetes.Interface, hubNamespace, clusterName string) error {
	name := KubeconfigSecretName(clusterName)
	secrets := hub.CoreV1().Secrets(hubNamespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{KubeconfigKey: c.Kubeconfig}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	s.Data = map[string][]byte{KubeconfigKey: c.Kubeconfig}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	return err
}

// Revoke deletes the token Secret in the region and waits (at most 30 s) until the region's
// kube-apiserver refuses the token (401), which it does once its informer has seen the deletion.
// The hub Secret is left as it is: the credentials in it are now dead.
func (c *Credentials) Revoke(ctx context.Context) error {
	err := c.Region.Client.CoreV1().Secrets(c.Namespace).Delete(ctx, c.TokenSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	direct := &rest.Config{Host: c.Region.Config.Host, BearerToken: c.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA}}
	cs, err := kubernetes.NewForConfig(direct)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cs.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("token of %s/%s still accepted 30s after its deletion (last: %v)", c.Namespace, c.TokenSecret, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Rotate creates a new token Secret (schemagate-hub-token-<random>) for the same ServiceAccount,
// waits for its token, and rewrites the hub Secret <clusterName>-kubeconfig with it. The old
// token stays valid until Revoke on c: call it to finish the rotation (or not, to test a
// manager that keeps using the old one).
func (c *Credentials) Rotate(ctx context.Context, hub kubernetes.Interface, hubNamespace, clusterName string) (*Credentials, error) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{GenerateName: spoke.TokenSecret + "-", Namespace: c.Namespace,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: spoke.ServiceAccount}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	created, err := c.Region.Client.CoreV1().Secrets(c.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	next, err := c.Region.credentialsFrom(ctx, c.Namespace, created.Name)
	if err != nil {
		return nil, err
	}
	return next, next.WriteSecret(ctx, hub, hubNamespace, clusterName)
}
