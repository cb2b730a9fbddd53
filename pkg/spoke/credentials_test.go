package spoke

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// secretName is what the controller passes for messages: namespace/name.
const secretName = "edge/eu-1-kubeconfig"

// kubeconfig is a valid kubeconfig with one context (eu-1) whose user has a token; edit changes
// it before it is written.
func kubeconfig(t testing.TB, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["eu-1"] = &clientcmdapi.Cluster{Server: "https://eu-1.example:6443", CertificateAuthorityData: []byte("ca-pem"), TLSServerName: "api.eu-1"}
	c.AuthInfos["schemagate-hub"] = &clientcmdapi.AuthInfo{Token: "tok-123"}
	c.Contexts["eu-1"] = &clientcmdapi.Context{Cluster: "eu-1", AuthInfo: "schemagate-hub"}
	c.CurrentContext = "eu-1"
	if edit != nil {
		edit(c)
	}
	b, err := clientcmd.Write(*c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func user(c *clientcmdapi.Config) *clientcmdapi.AuthInfo { return c.AuthInfos["schemagate-hub"] }

func capiCluster() *routingv1alpha1.ShardCluster { return &routingv1alpha1.ShardCluster{Name: "eu-1"} }

// A kubeconfig is read from key "value" (Cluster API's <cluster>-kubeconfig) unless secretRef
// names another key; its current context's server, CA, TLS server name and token or client
// certificate make the config.
func TestConfigKubeconfig(t *testing.T) {
	cfg, err := Config(capiCluster(), secretName, map[string][]byte{"value": kubeconfig(t, nil)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://eu-1.example:6443" || cfg.BearerToken != "tok-123" || string(cfg.CAData) != "ca-pem" ||
		cfg.TLSClientConfig.ServerName != "api.eu-1" || cfg.Insecure || len(cfg.CertData) != 0 {
		t.Errorf("token kubeconfig: %+v", cfg)
	}

	cert := kubeconfig(t, func(c *clientcmdapi.Config) {
		c.AuthInfos["schemagate-hub"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert-pem"), ClientKeyData: []byte("key-pem")}
	})
	cfg, err = Config(capiCluster(), secretName, map[string][]byte{"value": cert}, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || string(cfg.CertData) != "cert-pem" || string(cfg.KeyData) != "key-pem" || string(cfg.CAData) != "ca-pem" {
		t.Errorf("client certificate kubeconfig: %+v", cfg)
	}

	// One context and no current-context: that context.
	cfg, err = Config(capiCluster(), secretName, map[string][]byte{"value": kubeconfig(t, func(c *clientcmdapi.Config) { c.CurrentContext = "" })}, false)
	if err != nil || cfg.Host != "https://eu-1.example:6443" {
		t.Errorf("single context without current-context: %v %+v", err, cfg)
	}
	// Several contexts: the current one.
	cfg, err = Config(capiCluster(), secretName, map[string][]byte{"value": kubeconfig(t, func(c *clientcmdapi.Config) {
		c.Clusters["other"] = &clientcmdapi.Cluster{Server: "https://other.example"}
		c.Contexts["other"] = &clientcmdapi.Context{Cluster: "other", AuthInfo: "schemagate-hub"}
	})}, false)
	if err != nil || cfg.Host != "https://eu-1.example:6443" {
		t.Errorf("current context among several: %v %+v", err, cfg)
	}
	// Plain http is accepted on loopback only (tests).
	for _, server := range []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"} {
		cfg, err = Config(capiCluster(), secretName, map[string][]byte{"value": kubeconfig(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].Server = server })}, false)
		if err != nil || cfg.Host != server {
			t.Errorf("server %s: %v %+v", server, err, cfg)
		}
	}
}

// Every refusal is a *CredentialError whose message names the Secret and says what is wrong.
func TestConfigKubeconfigRefusals(t *testing.T) {
	long := bytes.Repeat([]byte("x"), MaxCredentialBytes+1)
	cases := []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"exec plugin", kc(t, func(c *clientcmdapi.Config) {
			user(c).Exec = &clientcmdapi.ExecConfig{Command: "aws", APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		}), "exec credential plugins are not run"},
		{"auth-provider", kc(t, func(c *clientcmdapi.Config) { user(c).AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"} }),
			"auth-provider plugins are not supported"},
		{"token file", kc(t, func(c *clientcmdapi.Config) { user(c).TokenFile = "/var/run/secrets/token" }), "refers to files on the manager's filesystem"},
		{"client certificate file", kc(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["schemagate-hub"] = &clientcmdapi.AuthInfo{ClientCertificate: "/etc/cert.pem", ClientKeyData: []byte("k")}
		}), "refers to files on the manager's filesystem"},
		{"client key file", kc(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["schemagate-hub"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("c"), ClientKey: "/etc/key.pem"}
		}), "refers to files on the manager's filesystem"},
		{"CA file", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].CertificateAuthority = "/etc/ca.pem" }), "refers to files on the manager's filesystem"},
		{"username and password", kc(t, func(c *clientcmdapi.Config) { user(c).Username, user(c).Password = "admin", "secret" }),
			"username/password credentials are not supported"},
		{"password alone", kc(t, func(c *clientcmdapi.Config) { user(c).Password = "secret" }), "username/password credentials are not supported"},
		{"impersonation", kc(t, func(c *clientcmdapi.Config) { user(c).Impersonate = "system:admin" }), "impersonation is not supported"},
		{"impersonated groups", kc(t, func(c *clientcmdapi.Config) { user(c).ImpersonateGroups = []string{"system:masters"} }), "impersonation is not supported"},
		{"impersonated UID", kc(t, func(c *clientcmdapi.Config) { user(c).ImpersonateUID = "0" }), "impersonation is not supported"},
		{"proxy-url", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].ProxyURL = "http://proxy.example:3128" }), "proxy-url is not supported"},
		{"no credentials", kc(t, func(c *clientcmdapi.Config) { user(c).Token = "" }),
			`user "schemagate-hub" has neither a token nor a client certificate and key`},
		{"certificate without key", kc(t, func(c *clientcmdapi.Config) {
			c.AuthInfos["schemagate-hub"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("c")}
		}), "has neither a token nor a client certificate and key"},
		{"no current context among several", kc(t, func(c *clientcmdapi.Config) {
			c.CurrentContext = ""
			c.Contexts["other"] = &clientcmdapi.Context{Cluster: "eu-1", AuthInfo: "schemagate-hub"}
		}), `key "value" has no current context`},
		{"current context not defined", kc(t, func(c *clientcmdapi.Config) { c.CurrentContext = "gone" }), "has no current context"},
		{"context names a missing user", kc(t, func(c *clientcmdapi.Config) { c.Contexts["eu-1"].AuthInfo = "nobody" }),
			`context "eu-1" names a user or cluster it does not define`},
		{"context names a missing cluster", kc(t, func(c *clientcmdapi.Config) { c.Contexts["eu-1"].Cluster = "nowhere" }),
			`context "eu-1" names a user or cluster it does not define`},
		{"http, not loopback", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].Server = "http://eu-1.example:6443" }),
			`server "http://eu-1.example:6443" must be an https URL`},
		{"http to a name that starts like a loopback address", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].Server = "http://127.attacker.example" }),
			"must be an https URL"},
		{"another scheme", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].Server = "unix:///var/run/k8s.sock" }), "is not a URL with a host"},
		{"no server", kc(t, func(c *clientcmdapi.Config) { c.Clusters["eu-1"].Server = "" }), "is not a URL with a host"},
		{"over MaxCredentialBytes", map[string][]byte{"value": long}, `key "value" is 262145 bytes, over the 262144 schemagate reads`},
		{"not a kubeconfig", map[string][]byte{"value": []byte("{{{not yaml")}, `key "value" is not a kubeconfig`},
		{"missing key", map[string][]byte{"kubeconfig": kubeconfig(t, nil)}, `has no key "value"`},
		{"empty key", map[string][]byte{"value": nil}, `has no key "value"`},
		{"no data", nil, `has no key "value"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config(capiCluster(), secretName, c.data, false)
			checkRefusal(t, cfg != nil, err, c.want)
		})
	}
}

func kc(t *testing.T, edit func(*clientcmdapi.Config)) map[string][]byte {
	return map[string][]byte{"value": kubeconfig(t, edit)}
}

// checkRefusal: no config, a *CredentialError naming the Secret and containing want.
func checkRefusal(t *testing.T, gotConfig bool, err error, want string) {
	t.Helper()
	var ce *CredentialError
	switch {
	case gotConfig || err == nil:
		t.Fatalf("accepted (err %v), want a refusal containing %q", err, want)
	case !errors.As(err, &ce):
		t.Fatalf("%T %v, want a *CredentialError", err, err)
	case !strings.HasPrefix(err.Error(), "Secret "+secretName+": "):
		t.Errorf("%q does not name the Secret %s", err, secretName)
	case !strings.Contains(err.Error(), want):
		t.Errorf("%q, want it to contain %q", err, want)
	}
}

// argoSecret is an Argo CD cluster Secret's data: server and config (JSON of cfg).
func argoSecret(t testing.TB, server string, cfg map[string]any) map[string][]byte {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{"name": []byte("eu-1"), "server": []byte(server), "config": b}
}

func argoShard() *routingv1alpha1.ShardCluster {
	return &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "cluster-eu-1", Format: routingv1alpha1.ClusterSecretArgoCD}}
}

// An Argo CD cluster Secret: the server from key server, the credentials from the JSON of key
// config (bearerToken, tlsClientConfig); key name is not read.
func TestConfigArgoCD(t *testing.T) {
	cfg, err := Config(argoShard(), secretName, argoSecret(t, "https://eu-1.example:6443", map[string]any{
		"bearerToken":     "tok-argo",
		"tlsClientConfig": map[string]any{"caData": []byte("ca-pem"), "serverName": "api.eu-1"},
	}), false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://eu-1.example:6443" || cfg.BearerToken != "tok-argo" || string(cfg.CAData) != "ca-pem" || cfg.TLSClientConfig.ServerName != "api.eu-1" {
		t.Errorf("bearer token: %+v", cfg)
	}
	insecure := argoSecret(t, "https://eu-1.example", map[string]any{
		"tlsClientConfig": map[string]any{"certData": []byte("cert-pem"), "keyData": []byte("key-pem"), "insecure": true},
	})
	if _, err := Config(argoShard(), secretName, insecure, false); err == nil || !strings.Contains(err.Error(), "tlsClientConfig.insecure") || !strings.Contains(err.Error(), "schemagate.io/allow-insecure-tls") {
		t.Errorf("insecure without the Secret's opt-in: %v, want a refusal naming the field and the annotation", err)
	}
	cfg, err = Config(argoShard(), secretName, insecure, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BearerToken != "" || string(cfg.CertData) != "cert-pem" || string(cfg.KeyData) != "key-pem" || !cfg.Insecure {
		t.Errorf("client certificate: %+v", cfg)
	}
	// A null provider is no provider.
	if _, err := Config(argoShard(), secretName, argoSecret(t, "https://eu-1.example", map[string]any{"bearerToken": "t", "execProviderConfig": nil}), false); err != nil {
		t.Errorf("execProviderConfig null: %v", err)
	}
}

func TestConfigArgoCDRefusals(t *testing.T) {
	token := map[string]any{"bearerToken": "t"}
	with := func(k string, v any) map[string]any { return map[string]any{"bearerToken": "t", k: v} }
	huge := argoSecret(t, "https://eu-1.example", token)
	huge["config"] = append([]byte(`{"bearerToken":"`), append(bytes.Repeat([]byte("x"), MaxCredentialBytes), '"', '}')...)
	cases := []struct {
		name string
		data map[string][]byte
		want string
	}{
		{"exec provider", argoSecret(t, "https://eu-1.example", with("execProviderConfig", map[string]any{"command": "argocd-k8s-auth"})),
			"exec and AWS credential providers are not run"},
		{"AWS auth", argoSecret(t, "https://eu-1.example", with("awsAuthConfig", map[string]any{"clusterName": "eu-1"})),
			"exec and AWS credential providers are not run"},
		{"username and password", argoSecret(t, "https://eu-1.example", map[string]any{"username": "admin", "password": "x"}),
			"username/password credentials are not supported"},
		{"proxyUrl", argoSecret(t, "https://eu-1.example", with("proxyUrl", "http://proxy:3128")), "proxyUrl is not supported"},
		{"no credentials", argoSecret(t, "https://eu-1.example", map[string]any{"tlsClientConfig": map[string]any{"caData": []byte("ca")}}),
			"has neither bearerToken nor tlsClientConfig certData and keyData"},
		{"http, not loopback", argoSecret(t, "http://eu-1.example", token), `key server: server "http://eu-1.example" must be an https URL`},
		{"not JSON", map[string][]byte{"server": []byte("https://eu-1.example"), "config": []byte("bearerToken: t")}, "key config is not an Argo CD cluster config"},
		{"no server", map[string][]byte{"config": []byte(`{"bearerToken":"t"}`)}, "an Argo CD cluster Secret needs keys server and config"},
		{"no config", map[string][]byte{"server": []byte("https://eu-1.example")}, "an Argo CD cluster Secret needs keys server and config"},
		{"config over MaxCredentialBytes", huge, "key config is 262162 bytes, over the 262144 schemagate reads"},
		{"server over 2048 bytes", argoSecret(t, "https://"+strings.Repeat("a", 2048)+".example", token), "key server is 2064 bytes, over the 2048 schemagate reads"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config(argoShard(), secretName, c.data, false)
			checkRefusal(t, cfg != nil, err, c.want)
		})
	}
}

// secretRef: the key defaults to "value" and the format to Kubeconfig; a key names another data
// key; format ArgoCD ignores key.
func TestConfigSecretRefDefaults(t *testing.T) {
	good := kubeconfig(t, nil)
	cases := []struct {
		name    string
		cluster *routingv1alpha1.ShardCluster
		data    map[string][]byte
		want    string // "" accepted, else part of the refusal
	}{
		{"no secretRef: key value", capiCluster(), map[string][]byte{"value": good}, ""},
		{"no secretRef: another key is not read", capiCluster(), map[string][]byte{"kubeconfig": good}, `has no key "value"`},
		{"secretRef without key or format", &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s"}},
			map[string][]byte{"value": good}, ""},
		{"secretRef key", &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s", Key: "kubeconfig"}},
			map[string][]byte{"kubeconfig": good, "value": []byte("garbage")}, ""},
		{"secretRef key missing", &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s", Key: "kubeconfig"}},
			map[string][]byte{"value": good}, `has no key "kubeconfig"`},
		{"format Kubeconfig", &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s", Format: routingv1alpha1.ClusterSecretKubeconfig}},
			map[string][]byte{"value": good}, ""},
		{"format ArgoCD does not read a kubeconfig", argoShard(), map[string][]byte{"value": good}, "needs keys server and config"},
		{"format ArgoCD ignores key", &routingv1alpha1.ShardCluster{Name: "eu-1", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s", Key: "value", Format: routingv1alpha1.ClusterSecretArgoCD}},
			argoSecret(t, "https://eu-1.example", map[string]any{"bearerToken": "t"}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config(c.cluster, secretName, c.data, false)
			if c.want == "" {
				if err != nil || cfg == nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			checkRefusal(t, cfg != nil, err, c.want)
		})
	}
}

// The same data gives the same print whatever the order it was built in; any change of a key or
// a value, or moving bytes between them, gives another.
func TestFingerprint(t *testing.T) {
	base := map[string][]byte{"value": []byte("kubeconfig"), "server": []byte("https://a"), "config": []byte("{}")}
	fp := Fingerprint(base)
	if len(fp) != 64 {
		t.Fatalf("fingerprint %q is not hex SHA-256", fp)
	}
	reordered := map[string][]byte{}
	for _, k := range []string{"config", "value", "server"} {
		reordered[k] = append([]byte(nil), base[k]...)
	}
	if Fingerprint(reordered) != fp {
		t.Errorf("insertion order changes the fingerprint")
	}
	if Fingerprint(base) != fp {
		t.Errorf("not deterministic")
	}
	for name, d := range map[string]map[string][]byte{
		"a value changes":       {"value": []byte("kubeconfiG"), "server": []byte("https://a"), "config": []byte("{}")},
		"a key is renamed":      {"Value": []byte("kubeconfig"), "server": []byte("https://a"), "config": []byte("{}")},
		"a key is added":        {"value": []byte("kubeconfig"), "server": []byte("https://a"), "config": []byte("{}"), "x": nil},
		"a key is removed":      {"value": []byte("kubeconfig"), "server": []byte("https://a")},
		"a value is emptied":    {"value": []byte("kubeconfig"), "server": []byte("https://a"), "config": nil},
		"bytes move key→value":  {"valu": []byte("ekubeconfig"), "server": []byte("https://a"), "config": []byte("{}")},
		"bytes move value→next": {"value": []byte("kubeconfi"), "server": []byte("ghttps://a"), "config": []byte("{}")},
	} {
		if Fingerprint(d) == fp {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	if Fingerprint(nil) != Fingerprint(map[string][]byte{}) {
		t.Errorf("nil and empty data differ")
	}
}

// A kubeconfig with insecure-skip-tls-verify is refused, naming the field and the Secret's
// opt-in; with the opt-in it is used, unverified.
func TestConfigInsecureNeedsTheSecretsOptIn(t *testing.T) {
	data := map[string][]byte{"value": kubeconfig(t, func(c *clientcmdapi.Config) {
		c.Clusters["eu-1"].CertificateAuthorityData = nil
		c.Clusters["eu-1"].InsecureSkipTLSVerify = true
	})}
	if _, err := Config(capiCluster(), secretName, data, false); err == nil || !strings.Contains(err.Error(), `insecure-skip-tls-verify in key "value"`) || !strings.Contains(err.Error(), "schemagate.io/allow-insecure-tls=true") {
		t.Fatalf("insecure without the opt-in: %v", err)
	}
	cfg, err := Config(capiCluster(), secretName, data, true)
	if err != nil || !cfg.Insecure {
		t.Fatalf("insecure with the opt-in: %v %+v", err, cfg)
	}
	// The opt-in changes nothing for a kubeconfig that verifies.
	if cfg, err := Config(capiCluster(), secretName, map[string][]byte{"value": kubeconfig(t, nil)}, true); err != nil || cfg.Insecure {
		t.Fatalf("a verifying kubeconfig with the opt-in: %v %+v", err, cfg)
	}
}
