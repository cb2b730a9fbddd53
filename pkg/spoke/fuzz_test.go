package spoke

import (
	"net"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// FuzzConfig: whatever a Secret holds, in either format, Config does not panic, and a config it
// returns runs no plugin, reads no file, goes through no proxy, impersonates no one, and talks
// to an https server (or plain http on loopback).
func FuzzConfig(f *testing.F) {
	f.Add(false, "value", kubeconfig(f, nil), "", []byte(nil))
	f.Add(false, "kubeconfig", []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:8080', proxy-url: 'http://p'}\n"+
		"users:\n- name: u\n  user: {token: t, exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"), "", []byte(nil))
	f.Add(true, "", []byte(nil), "https://eu-1.example:6443", []byte(`{"bearerToken":"t","tlsClientConfig":{"caData":"Y2E="}}`))
	f.Add(true, "", []byte(nil), "http://localhost:1", []byte(`{"tlsClientConfig":{"certData":"Yw==","keyData":"aw=="},"execProviderConfig":null}`))
	f.Add(true, "", []byte(nil), "http://[::1]:8080", []byte(`{"bearerToken":"t","proxyUrl":"http://p"}`))
	// A DNS name that starts like a loopback address is not one (once accepted over plain http).
	f.Add(true, "", []byte(nil), "http://127.0.0.1.nip.io", []byte(`{"bearerToken":"t"}`))
	f.Fuzz(func(t *testing.T, argo bool, key string, kubeconfig []byte, server string, config []byte) {
		cluster := &routingv1alpha1.ShardCluster{Name: "c", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "s", Key: key}}
		data := map[string][]byte{key: kubeconfig}
		if argo {
			cluster.SecretRef.Format = routingv1alpha1.ClusterSecretArgoCD
			data = map[string][]byte{"server": []byte(server), "config": config}
		}
		allowInsecure := len(key)%2 == 0
		cfg, err := Config(cluster, "ns/s", data, allowInsecure)
		if err != nil {
			if cfg != nil {
				t.Fatalf("a config and an error: %v", err)
			}
			if _, ok := err.(*CredentialError); !ok {
				t.Fatalf("%T %v, want a *CredentialError", err, err)
			}
			return
		}
		switch {
		case cfg.Insecure && !allowInsecure:
			t.Fatalf("an unverified server without the Secret's opt-in: %+v", cfg)
		case cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.AuthConfigPersister != nil:
			t.Fatalf("a plugin: %+v", cfg)
		case cfg.BearerTokenFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "":
			t.Fatalf("a file: %+v", cfg)
		case cfg.Proxy != nil || cfg.Dial != nil || cfg.Transport != nil || cfg.WrapTransport != nil:
			t.Fatalf("a proxy or transport: %+v", cfg)
		case cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) > 0 || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Extra) > 0:
			t.Fatalf("impersonation: %+v", cfg.Impersonate)
		case cfg.Username != "" || cfg.Password != "":
			t.Fatalf("basic auth: %+v", cfg)
		case cfg.BearerToken == "" && (len(cfg.CertData) == 0 || len(cfg.KeyData) == 0):
			t.Fatalf("no credentials: %+v", cfg)
		}
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Host == "" {
			t.Fatalf("host %q: %v", cfg.Host, err)
		}
		if u.Scheme == "https" {
			return
		}
		ip := net.ParseIP(u.Hostname())
		if u.Scheme != "http" || (u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())) {
			t.Fatalf("host %q is neither https nor http on loopback", cfg.Host)
		}
	})
}

// FuzzReadAnchor: whatever an anchor holds, ReadAnchor and Owner do not panic and no value read
// is over maxAnchorValue.
func FuzzReadAnchor(f *testing.F) {
	cm := NewAnchor(rsvc(), "edge", "hub-a", []string{"r1", "r2"})
	d := cm.Data
	f.Add(d[KeyHub], d[KeyNamespace], d[KeyName], d[KeyUID], d[KeyGeneration], d[KeyRevisions], d[KeySchemaVersion], "")
	f.Add("hub-a", "edge", "edge-router", "", "-9223372036854775809", ",,", "", "hub-b")
	f.Add("", "", "", "", "0x10", "\xff", "\x00", "")
	f.Fuzz(func(t *testing.T, hub, ns, name, uid, gen, revs, schema, takenOver string) {
		cm := &corev1.ConfigMap{Data: map[string]string{KeyHub: hub, KeyNamespace: ns, KeyName: name, KeyUID: uid,
			KeyGeneration: gen, KeyRevisions: revs, KeySchemaVersion: schema, KeyTakenOverFrom: takenOver}}
		a := ReadAnchor(cm)
		checkBounded(t, a)
		r := rsvc()
		if why := a.Owner(r, "hub-a"); (why == "") != (a.Namespace == r.Namespace && a.Name == r.Name && a.Hub == "hub-a") {
			t.Fatalf("Owner %q for %+v", why, a)
		}
	})
}
