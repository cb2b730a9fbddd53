package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// applyPlaces applies the plan's first intents, its Places (pkg/rollout/places.go), before any
// other write: each is added to schemagate.io/clusters-used (so a later spec that no longer names
// a cluster still knows where to clean up), then, in each cluster this reconcile reached, the
// anchor is made to exist and record what the place says (spokes[shard].anchor is then set).
//
// err is the clusters-used write's error: nothing else may then be written (a Conflict is the
// retirement controller's write meanwhile: look again shortly). down are the shards whose anchor
// could not be written, with why: each is frozen for this reconcile, like a region whose API
// server failed a write (spoke_writes.go).
func (r *RoutingServiceReconciler) applyPlaces(ctx context.Context, rsvc *routingv1alpha1.RoutingService, places []rollout.Place, spokes map[string]*spokeShard) (down map[string]error, err error) {
	used := readClustersUsed(rsvc)
	for _, p := range places {
		used = append(used, usedCluster{Shard: p.Shard, Cluster: p.Cluster})
	}
	if err := r.setClustersUsed(ctx, rsvc, used); err != nil {
		return nil, err
	}
	type result struct {
		cm  *corev1.ConfigMap
		err error
	}
	written := map[*spokeConn]result{} // shards in one namespace of one cluster share an anchor
	for _, p := range places {
		sp := spokes[p.Shard]
		if sp == nil {
			continue // not reached, or managed elsewhere: nothing is written there
		}
		res, ok := written[sp.conn]
		if !ok {
			res.cm, res.err = r.ensureAnchor(ctx, rsvc, sp, p.Revisions)
			written[sp.conn] = res
		}
		if res.err != nil {
			down = markDown(down, p.Shard, res.err)
			continue
		}
		sp.anchor = res.cm
	}
	return down, nil
}

// ensureAnchor creates sp's anchor when there was none, or brings what it records up to date
// (revisions, and the hub it takes over from), and returns it. A cache behind the API server (a
// Conflict, or AlreadyExists) is read past once; an anchor that was replaced, or became
// another's, since this reconcile observed the place is an error: what was observed under it no
// longer holds.
func (r *RoutingServiceReconciler) ensureAnchor(ctx context.Context, rsvc *routingv1alpha1.RoutingService, sp *spokeShard, revisions []string) (*corev1.ConfigMap, error) {
	hub := r.Spokes.Hub
	key := client.ObjectKey{Namespace: sp.conn.namespace, Name: spoke.AnchorName(rsvc.Name)}
	have := sp.anchor
	for attempt := 0; ; attempt++ {
		var err error
		var want *corev1.ConfigMap
		if have == nil {
			want = spoke.NewAnchor(rsvc, sp.conn.namespace, hub, revisions)
			if err = sp.conn.client.Create(ctx, want); err != nil {
				err = fmt.Errorf("creating its anchor ConfigMap %s/%s: %w", key.Namespace, key.Name, err)
			}
		} else {
			want = have.DeepCopy()
			spoke.SetAnchorData(want, rsvc, hub, revisions)
			if sp.takeoverFrom != "" {
				want.Data[spoke.KeyTakenOverFrom] = sp.takeoverFrom
			}
			if equalData(have.Data, want.Data) {
				return have, nil
			}
			if err = sp.conn.client.Patch(ctx, want, client.MergeFromWithOptions(have, client.MergeFromWithOptimisticLock{})); err != nil {
				err = fmt.Errorf("updating its anchor ConfigMap %s/%s: %w", key.Namespace, key.Name, err)
			}
		}
		if err == nil {
			return want, nil
		}
		if attempt > 0 || (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)) {
			return nil, err
		}
		fresh := &corev1.ConfigMap{}
		if err := sp.conn.client.Get(ctx, key, fresh); err != nil {
			return nil, fmt.Errorf("reading its anchor ConfigMap %s/%s: %w", key.Namespace, key.Name, err)
		}
		if have != nil && fresh.UID != have.UID {
			return nil, fmt.Errorf("its anchor ConfigMap %s/%s was replaced while it was read", key.Namespace, key.Name)
		}
		a := spoke.ReadAnchor(fresh)
		if why := a.Owner(rsvc, hub); why != "" && (sp.takeoverFrom == "" || a.Hub != sp.takeoverFrom) {
			return nil, fmt.Errorf("its anchor ConfigMap %s/%s changed while it was read: %s", key.Namespace, key.Name, why)
		}
		have = fresh
	}
}
