// Package spoke turns a cluster Secret into a client configuration for a shard's cluster (a
// spoke), and describes the spoke-local anchor that owns what schemagate creates there. It does no
// I/O: the controller reads the Secret and hands its data here.
package spoke

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sort"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// MaxCredentialBytes bounds what is parsed of a Secret's credentials (256 KiB): a kubeconfig with
// a CA bundle and a token is a few KiB.
const MaxCredentialBytes = 256 << 10

// CredentialError is a Secret whose credentials schemagate refuses to use. Its message names the
// Secret and the key or field.
type CredentialError struct{ msg string }

func (e *CredentialError) Error() string { return e.msg }

func refuse(secret, format string, args ...any) error {
	return &CredentialError{msg: fmt.Sprintf("Secret %s: ", secret) + fmt.Sprintf(format, args...)}
}

// Config builds the client configuration for cluster from the data of its Secret (named secret,
// for messages). Only self-contained credentials are accepted: a bearer token or a client
// certificate with the server's CA, inline. exec and auth-provider plugins, file references
// (token, certificate or CA files read from the manager's filesystem), username/password and
// impersonation are refused with a *CredentialError, as are data over MaxCredentialBytes and a
// server that is not an https (or http on loopback) URL. Credentials that skip verifying the
// server's certificate are refused unless allowInsecure (the Secret's
// routingv1alpha1.AnnotationAllowInsecureTLS).
func Config(cluster *routingv1alpha1.ShardCluster, secret string, data map[string][]byte, allowInsecure bool) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	where := "tlsClientConfig.insecure in key config"
	switch cluster.SecretFormat() {
	case routingv1alpha1.ClusterSecretArgoCD:
		cfg, err = argoConfig(secret, data)
	default:
		key := cluster.SecretKey()
		raw, ok := data[key]
		if !ok || len(raw) == 0 {
			return nil, refuse(secret, "has no key %q (a kubeconfig, as Cluster API writes <cluster>-kubeconfig)", key)
		}
		cfg, err = kubeconfigConfig(secret, key, raw)
		where = fmt.Sprintf("insecure-skip-tls-verify in key %q", key)
	}
	if err != nil {
		return nil, err
	}
	if cfg.Insecure && !allowInsecure {
		return nil, refuse(secret, "%s: the server's certificate would not be verified, and the credentials would go to whoever answers; give the cluster's CA instead, or annotate the Secret %s=true to accept that",
			where, routingv1alpha1.AnnotationAllowInsecureTLS)
	}
	return cfg, nil
}

func kubeconfigConfig(secret, key string, raw []byte) (*rest.Config, error) {
	if len(raw) > MaxCredentialBytes {
		return nil, refuse(secret, "key %q is %d bytes, over the %d schemagate reads", key, len(raw), MaxCredentialBytes)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, refuse(secret, "key %q is not a kubeconfig: %v", key, err)
	}
	ctxName := kc.CurrentContext
	if ctxName == "" && len(kc.Contexts) == 1 {
		for name := range kc.Contexts {
			ctxName = name
		}
	}
	kctx := kc.Contexts[ctxName]
	if kctx == nil {
		return nil, refuse(secret, "key %q has no current context", key)
	}
	ai := kc.AuthInfos[kctx.AuthInfo]
	cl := kc.Clusters[kctx.Cluster]
	if ai == nil || cl == nil {
		return nil, refuse(secret, "key %q: context %q names a user or cluster it does not define", key, ctxName)
	}
	switch {
	case ai.Exec != nil:
		return nil, refuse(secret, "key %q: exec credential plugins are not run by schemagate; use a token or a client certificate", key)
	case ai.AuthProvider != nil:
		return nil, refuse(secret, "key %q: auth-provider plugins are not supported; use a token or a client certificate", key)
	case ai.TokenFile != "" || ai.ClientCertificate != "" || ai.ClientKey != "" || cl.CertificateAuthority != "":
		return nil, refuse(secret, "key %q refers to files on the manager's filesystem; inline the token, certificate and CA data", key)
	case ai.Username != "" || ai.Password != "":
		return nil, refuse(secret, "key %q: username/password credentials are not supported", key)
	case ai.Impersonate != "" || len(ai.ImpersonateGroups) > 0 || ai.ImpersonateUID != "":
		return nil, refuse(secret, "key %q: impersonation is not supported", key)
	case ai.Token == "" && (len(ai.ClientCertificateData) == 0 || len(ai.ClientKeyData) == 0):
		return nil, refuse(secret, "key %q: user %q has neither a token nor a client certificate and key", key, kctx.AuthInfo)
	case cl.ProxyURL != "":
		return nil, refuse(secret, "key %q: proxy-url is not supported", key)
	}
	if err := checkServer(cl.Server); err != nil {
		return nil, refuse(secret, "key %q: %v", key, err)
	}
	return &rest.Config{
		Host:        cl.Server,
		BearerToken: ai.Token,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cl.InsecureSkipTLSVerify,
			ServerName: cl.TLSServerName,
			CAData:     cl.CertificateAuthorityData,
			CertData:   ai.ClientCertificateData,
			KeyData:    ai.ClientKeyData,
		},
	}, nil
}

// argoCluster is the part of an Argo CD cluster Secret's config key schemagate reads.
type argoCluster struct {
	BearerToken     string `json:"bearerToken"`
	Username        string `json:"username"`
	Password        string `json:"password"`
	TLSClientConfig struct {
		Insecure   bool   `json:"insecure"`
		ServerName string `json:"serverName"`
		CAData     []byte `json:"caData"`
		CertData   []byte `json:"certData"`
		KeyData    []byte `json:"keyData"`
	} `json:"tlsClientConfig"`
	ExecProviderConfig *json.RawMessage `json:"execProviderConfig"`
	AWSAuthConfig      *json.RawMessage `json:"awsAuthConfig"`
	ProxyURL           string           `json:"proxyUrl"`
}

func argoConfig(secret string, data map[string][]byte) (*rest.Config, error) {
	server, raw := string(data["server"]), data["config"]
	if server == "" || len(raw) == 0 {
		return nil, refuse(secret, "an Argo CD cluster Secret needs keys server and config")
	}
	if len(raw) > MaxCredentialBytes {
		return nil, refuse(secret, "key config is %d bytes, over the %d schemagate reads", len(raw), MaxCredentialBytes)
	}
	if len(server) > maxServerBytes {
		return nil, refuse(secret, "key server is %d bytes, over the %d schemagate reads", len(server), maxServerBytes)
	}
	var ac argoCluster
	if err := json.Unmarshal(raw, &ac); err != nil {
		return nil, refuse(secret, "key config is not an Argo CD cluster config: %v", err)
	}
	switch {
	case ac.ExecProviderConfig != nil || ac.AWSAuthConfig != nil:
		return nil, refuse(secret, "key config: exec and AWS credential providers are not run by schemagate; use bearerToken or a client certificate")
	case ac.Username != "" || ac.Password != "":
		return nil, refuse(secret, "key config: username/password credentials are not supported")
	case ac.ProxyURL != "":
		return nil, refuse(secret, "key config: proxyUrl is not supported")
	case ac.BearerToken == "" && (len(ac.TLSClientConfig.CertData) == 0 || len(ac.TLSClientConfig.KeyData) == 0):
		return nil, refuse(secret, "key config has neither bearerToken nor tlsClientConfig certData and keyData")
	}
	if err := checkServer(server); err != nil {
		return nil, refuse(secret, "key server: %v", err)
	}
	return &rest.Config{
		Host:        server,
		BearerToken: ac.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   ac.TLSClientConfig.Insecure,
			ServerName: ac.TLSClientConfig.ServerName,
			CAData:     ac.TLSClientConfig.CAData,
			CertData:   ac.TLSClientConfig.CertData,
			KeyData:    ac.TLSClientConfig.KeyData,
		},
	}, nil
}

// maxServerBytes bounds an Argo CD Secret's server key.
const maxServerBytes = 2048

// checkServer accepts an https URL with a host, or plain http to a loopback address (tests):
// localhost, or a loopback IP such as 127.0.0.1 or ::1 (a DNS name that merely starts with
// "127." is not one).
func checkServer(server string) error {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return fmt.Errorf("server %q is not a URL with a host", server)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || isLoopbackIP(h) {
			return nil
		}
	}
	return fmt.Errorf("server %q must be an https URL", server)
}

func isLoopbackIP(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Fingerprint is a digest of a Secret's data (hex SHA-256 over its sorted keys and values), to
// tell a rotated Secret from the one a client was built from without keeping its contents.
func Fingerprint(data map[string][]byte) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}
