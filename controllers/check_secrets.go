package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/measure"
)

// checkSecrets reads the Secrets of namespace that checks name (a header's valueFrom, tls.ca,
// tls.clientCertificateSecretName) with get by name, past the cache, so the manager neither lists
// nor watches Secrets nor keeps them in memory past one reconcile (docs/security.md). The same
// `get` on secrets reads the credentials of a shard's cluster. The error messages name the
// Secret and say what to do, never its data.
func (r *RoutingServiceReconciler) checkSecrets(namespace string) measure.Secrets {
	reader := r.apiReader()
	return func(ctx context.Context, name string) (map[string][]byte, error) {
		var sec corev1.Secret
		err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sec)
		switch {
		case err == nil:
			return sec.Data, nil
		case apierrors.IsNotFound(err):
			return nil, measure.SecretErrorf("Secret %s/%s not found", namespace, name)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("the manager may not get Secret %s/%s: grant it get on secrets in %s (docs/security.md)", namespace, name, namespace)
		}
		return nil, measure.SecretErrorf("Secret %s/%s: %v", namespace, name, err)
	}
}
