//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/localcluster"
)

// startOwnCluster starts a control plane of the test's own, apart from the suite's shared one:
// one region (us-east-1) of one kwok node, with apiServerArgs added to kube-apiserver's. It is
// stopped when the test ends, and its state folder removed unless the test failed. Returns it
// with a client whose scheme knows Kubernetes' types, CRDs and RoutingServices.
func startOwnCluster(t *testing.T, ctx context.Context, prefix string, apiServerArgs ...string) (*localcluster.Cluster, client.Client) {
	t.Helper()
	state, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: filepath.Join(binDir, "k8s"), StateDir: state, Log: os.Stdout,
		Regions: []string{"us-east-1"}, NodesPerRegion: 1, APIServerArgs: apiServerArgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ic.Stop()
		if t.Failed() {
			t.Log("logs kept in", state)
		} else {
			_ = os.RemoveAll(state)
		}
	})
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, routingv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(ic.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return ic, c
}

// kubectlOn runs bin/k8s/kubectl against kubeconfig; the result is its combined output and error.
func kubectlOn(kubeconfig string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "k8s", "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
}

// serviceAccountKubeconfig writes a kubeconfig beside admin's (same server and CA) that
// authenticates as the ServiceAccount ns/name with a token from the TokenRequest API, valid 1 h:
// the identity a pod of that ServiceAccount would have. Returns the path and the token.
func serviceAccountKubeconfig(t *testing.T, cfg *rest.Config, admin, ns, name string) (string, string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	kc, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: tr.Status.Token}}
	for _, c := range kc.Contexts {
		c.AuthInfo = "sa"
	}
	path := filepath.Join(filepath.Dir(admin), "kubeconfig-"+ns+"-"+name)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path, tr.Status.Token
}

// createServiceAccount creates ns/name, the namespace too when missing.
func createServiceAccount(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	ensureNamespace(t, c, ns)
	if err := c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// ensureNamespace creates ns unless it exists.
func ensureNamespace(t *testing.T, c client.Client, ns string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// scrape GETs url with a bearer token; the manager's certificate is self-signed. Returns the
// status code.
func scrape(url, token string) (int, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback, self-signed
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// forbiddenLines returns the lines of a log file that report an API request refused (403), but
// for the owner-reference admission plugin's refusals while its discovery does not yet map
// RoutingService ("cannot find RESTMapping", waitForReplicaSet): those are about the API
// server's 30 s discovery refresh, not about the RBAC the caller checks.
func forbiddenLines(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(strings.ToLower(l), "forbidden") && !strings.Contains(l, "cannot find RESTMapping") {
			out = append(out, l)
		}
	}
	return out
}
