package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// Spokes keeps one client and one cache per cluster a shard names (a spoke), each limited to the
// shard's namespace there and to the objects schemagate labels. A spoke is connected, probed and
// re-connected in the background: a reconcile only reads what is known of it and never waits on
// it, so a dead or slow spoke slows no other RoutingService or shard.
//
// Credentials are read with Get from the RoutingService's namespace, only the Secret a shard
// names (never listed or watched), at most every SecretRecheck, so a rotated Secret is used
// without a restart.
type Spokes struct {
	// Hub identifies this hub in the spokes' anchors (--hub-id).
	Hub string
	// Secrets reads the credential Secrets (the manager's API reader: no cache of Secrets).
	Secrets client.Reader
	Scheme  *runtime.Scheme
	// ProbeInterval is how often each spoke is asked a question (a List of one ReplicaSet) to
	// know it answers; ProbeTimeout bounds each. Defaults 5 s and 3 s.
	ProbeInterval, ProbeTimeout time.Duration
	// SyncTimeout bounds a new cache's first sync (default 30 s); SecretRecheck how often a
	// Secret is read again (default 10 s).
	SyncTimeout, SecretRecheck time.Duration

	events chan event.GenericEvent
	mu     sync.Mutex
	conns  map[string]*spokeConn
}

// spokeConn is one spoke: a cluster's client and cache for one namespace there.
type spokeConn struct {
	key         string
	secret      string
	fingerprint string
	secretRead  time.Time
	namespace   string
	client      client.Client // direct reads and writes
	cache       cache.Cache
	cancel      context.CancelFunc

	mu          sync.Mutex
	state       routingv1alpha1.ClusterState
	message     string
	lastContact time.Time
	synced      bool
	rebuild     bool
	closed      bool // released (Release) or dropped: stopped, never handed out again
	// insecure: its credentials skip verifying the server's certificate (allowed by the Secret's
	// schemagate.io/allow-insecure-tls).
	insecure bool
	users    map[types.NamespacedName]bool
}

func (s *Spokes) defaults() {
	if s.ProbeInterval == 0 {
		s.ProbeInterval = 5 * time.Second
	}
	if s.ProbeTimeout == 0 {
		s.ProbeTimeout = 3 * time.Second
	}
	if s.SyncTimeout == 0 {
		s.SyncTimeout = 30 * time.Second
	}
	if s.SecretRecheck == 0 {
		s.SecretRecheck = 10 * time.Second
	}
	if s.conns == nil {
		s.conns = map[string]*spokeConn{}
	}
	if s.events == nil {
		s.events = make(chan event.GenericEvent, 1024)
	}
}

// Events is the channel of RoutingServices to reconcile because something changed in a spoke
// (an object there, or its reachability).
func (s *Spokes) Events() <-chan event.GenericEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defaults()
	return s.events
}

// view returns what is known of the spoke of shard, for rsvc, and its connection when its cache
// is in sync (nil otherwise). It starts or rebuilds the connection in the background when the
// Secret is new, rotated or the connection asked for it; it never blocks on the spoke.
func (s *Spokes) view(ctx context.Context, rsvc *routingv1alpha1.RoutingService, sc *routingv1alpha1.ShardCluster) (rollout.ClusterView, *spokeConn) {
	s.mu.Lock()
	s.defaults()
	ns := sc.NamespaceOr(rsvc.Namespace)
	secretName := sc.SecretName()
	key := connKey(rsvc, sc)
	c := s.conns[key]
	now := time.Now()
	s.mu.Unlock()

	v := rollout.ClusterView{Name: sc.Name}
	needRead := c == nil || c.secretDue(now, s.SecretRecheck) || c.wantsRebuild()
	if needRead {
		var sec corev1.Secret
		err := s.Secrets.Get(ctx, client.ObjectKey{Namespace: rsvc.Namespace, Name: secretName}, &sec)
		// A Secret that is gone, unreadable or refused closes the connection built from it:
		// nothing keeps using credentials that were revoked.
		switch {
		case apierrors.IsNotFound(err):
			s.drop(key)
			v.State, v.Message = routingv1alpha1.ClusterCredentialsRefused, fmt.Sprintf("Secret %s/%s not found", rsvc.Namespace, secretName)
			return v, nil
		case err != nil:
			s.drop(key)
			v.State, v.Message = routingv1alpha1.ClusterCredentialsRefused, fmt.Sprintf("Secret %s/%s cannot be read: %v", rsvc.Namespace, secretName, err)
			return v, nil
		}
		allowInsecure := sec.Annotations[routingv1alpha1.AnnotationAllowInsecureTLS] == "true"
		fp := spoke.Fingerprint(sec.Data)
		if allowInsecure {
			fp += "+" + routingv1alpha1.AnnotationAllowInsecureTLS
		}
		if c == nil || c.fingerprint != fp || c.wantsRebuild() {
			cfg, err := spoke.Config(sc, rsvc.Namespace+"/"+secretName, sec.Data, allowInsecure)
			if err != nil {
				s.drop(key)
				v.State, v.Message = routingv1alpha1.ClusterCredentialsRefused, err.Error()
				return v, nil
			}
			cfg.Timeout = 10 * time.Second
			nc, err := s.connect(ctx, key, ns, secretName, fp, cfg)
			if err != nil {
				v.State, v.Message = routingv1alpha1.ClusterCredentialsRefused, fmt.Sprintf("Secret %s/%s: %v", rsvc.Namespace, secretName, err)
				return v, nil
			}
			s.mu.Lock()
			old := s.conns[key]
			s.conns[key] = nc
			s.mu.Unlock()
			if old != nil {
				// The old connection's users move to the new one (a copy: each map is guarded
				// by its own connection's lock).
				old.cancel()
				old.mu.Lock()
				users := maps.Clone(old.users)
				old.closed = true
				old.mu.Unlock()
				nc.mu.Lock()
				maps.Copy(nc.users, users)
				nc.mu.Unlock()
			}
			c = nc
		}
		c.mu.Lock()
		c.secretRead = now
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		// Released as idle (Release) since it was looked up: the next reconcile connects anew.
		v.State, v.Message = routingv1alpha1.ClusterConnecting, "its connection is being set up again"
		return v, nil
	}
	c.users[types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}] = true
	v.State, v.Message, v.LastContact = c.state, c.message, c.lastContact
	if c.insecure {
		v.Note = fmt.Sprintf("its server's certificate is not verified (Secret %s/%s: %s)", rsvc.Namespace, c.secret, routingv1alpha1.AnnotationAllowInsecureTLS)
	}
	if v.State == routingv1alpha1.ClusterReachable && c.synced {
		return v, c
	}
	if v.State == routingv1alpha1.ClusterReachable {
		v.State, v.Message = routingv1alpha1.ClusterConnecting, "its cache is not in sync yet"
	}
	return v, nil
}

// drop closes the connection of key, if there is one, and wakes the RoutingServices that used
// it: its cache and probe stop, and the next view reads the Secret again.
func (s *Spokes) drop(key string) {
	s.mu.Lock()
	c := s.conns[key]
	delete(s.conns, key)
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.cancel()
	s.wake(c)
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// secretDue reports whether the connection's Secret was last read every or more ago.
func (c *spokeConn) secretDue(now time.Time, every time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return now.Sub(c.secretRead) >= every
}

// connKey names the connection a shard's cluster is reached through: the Secret (its namespace,
// name, format and key) and the namespace there. RoutingServices that name the same share it.
func connKey(rsvc *routingv1alpha1.RoutingService, sc *routingv1alpha1.ShardCluster) string {
	return rsvc.Namespace + "/" + sc.SecretName() + "/" + sc.NamespaceOr(rsvc.Namespace) + "/" + string(sc.SecretFormat()) + "/" + sc.SecretKey()
}

// Release records which connections the RoutingService name uses now (rsvc nil: none, it is
// gone): it stops using every other, and a connection no RoutingService uses any more is stopped
// (its cache and probe end), so a removed shard, a renamed Secret or a deleted RoutingService
// leaves nothing probing a cluster.
func (s *Spokes) Release(name types.NamespacedName, rsvc *routingv1alpha1.RoutingService) {
	inUse := map[string]bool{}
	if rsvc != nil {
		for _, u := range append(currentClusters(rsvc), retiredClusters(rsvc)...) {
			inUse[connKey(rsvc, &u.Cluster)] = true
		}
	}
	s.mu.Lock()
	conns := make([]*spokeConn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if inUse[c.key] {
			continue
		}
		c.mu.Lock()
		had := c.users[name]
		delete(c.users, name)
		idle := had && len(c.users) == 0
		if idle {
			// Under c.mu, so a view that has not yet added its user sees it and connects anew.
			c.closed = true
		}
		c.mu.Unlock()
		if !idle {
			continue
		}
		s.mu.Lock()
		if s.conns[c.key] == c {
			delete(s.conns, c.key)
			c.cancel()
		}
		s.mu.Unlock()
	}
}

// connections is how many spoke connections are open (for tests and the metrics).
func (s *Spokes) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (c *spokeConn) wantsRebuild() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rebuild
}

// connect builds a spoke connection and starts it in the background: its cache (namespace ns,
// schemagate's labels only), and the probe loop.
func (s *Spokes) connect(parent context.Context, key, ns, secret, fingerprint string, cfg *rest.Config) (*spokeConn, error) {
	managed, err := labels.Parse(rollout.LabelManagedBy + "=" + rollout.ManagedByValue)
	if err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: s.Scheme})
	if err != nil {
		return nil, err
	}
	// The cache's informers list and then watch: a watch is meant to stay open (the API server
	// ends it after its own timeoutSeconds), and client-go cuts every request, watches too, at
	// rest.Config.Timeout. So the cache's requests have no client timeout; the first sync is
	// bounded by SyncTimeout, and the direct client's requests by cfg.Timeout.
	cacheCfg := rest.CopyConfig(cfg)
	cacheCfg.Timeout = 0
	ca, err := cache.New(cacheCfg, cache.Options{Scheme: s.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultLabelSelector: managed, ReaderFailOnMissingInformer: true, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&appsv1.ReplicaSet{}: {Transform: keepReplicasWriter}}})
	if err != nil {
		return nil, err
	}
	// A spoke namespace may hold the shards of many RoutingServices: each List reads one bucket.
	if err := IndexFields(parent, ca, &appsv1.ReplicaSet{}, &corev1.Pod{}, &batchv1.Job{}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	c := &spokeConn{key: key, namespace: ns, secret: secret, fingerprint: fingerprint, client: direct, cache: ca, cancel: cancel, insecure: cfg.Insecure,
		state: routingv1alpha1.ClusterConnecting, message: "connecting", users: map[types.NamespacedName]bool{}}
	go s.run(ctx, c)
	return c, nil
}

// run starts c's cache, waits (bounded) for its informers to sync, then probes c until its
// context ends. Every change of state wakes c's RoutingServices.
func (s *Spokes) run(ctx context.Context, c *spokeConn) {
	log := logf.FromContext(ctx).WithValues("spoke", c.key)
	go func() { _ = c.cache.Start(ctx) }()
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &corev1.Pod{}, &corev1.ConfigMap{}, &policyv1.PodDisruptionBudget{}, &batchv1.Job{}} {
		syncCtx, done := context.WithTimeout(ctx, s.SyncTimeout)
		inf, err := c.cache.GetInformer(syncCtx, obj)
		done()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.set(s, routingv1alpha1.ClusterUnreachable, fmt.Sprintf("its cache did not sync: %v", err), false)
			c.mu.Lock()
			c.rebuild = true
			c.mu.Unlock()
			return
		}
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.wake(c) },
			UpdateFunc: func(any, any) { s.wake(c) },
			DeleteFunc: func(any) { s.wake(c) },
		})
	}
	c.mu.Lock()
	c.synced = true
	c.mu.Unlock()
	failing := false
	for {
		pctx, done := context.WithTimeout(ctx, s.ProbeTimeout)
		var rs appsv1.ReplicaSetList
		err := c.client.List(pctx, &rs, client.InNamespace(c.namespace), client.Limit(1))
		done()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && failing:
			// Back after a failure: the cache may hold what it had before it; start afresh so
			// nothing is decided on it (the next reconcile connects again).
			log.Info("spoke answers again; reconnecting")
			c.mu.Lock()
			c.rebuild, c.lastContact = true, time.Now()
			c.mu.Unlock()
			c.set(s, routingv1alpha1.ClusterConnecting, "it answers again; its cache is being rebuilt", true)
			return
		case err == nil:
			c.set(s, routingv1alpha1.ClusterReachable, "", true)
		case apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err):
			failing = true
			c.set(s, routingv1alpha1.ClusterCredentialsRefused, fmt.Sprintf("Secret %s: the cluster refused its credentials: %v", c.secret, err), false)
		default:
			failing = true
			c.set(s, routingv1alpha1.ClusterUnreachable, err.Error(), false)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.ProbeInterval):
		}
	}
}

// set records c's state (and contact, when it answered), and wakes its RoutingServices when the
// state changed.
func (c *spokeConn) set(s *Spokes, state routingv1alpha1.ClusterState, msg string, contact bool) {
	c.mu.Lock()
	changed := c.state != state
	c.state, c.message = state, boundMessage(msg)
	if contact {
		c.lastContact = time.Now()
	}
	c.mu.Unlock()
	if changed {
		s.wake(c)
	}
}

func boundMessage(msg string) string {
	if len(msg) > 512 {
		return msg[:512]
	}
	return msg
}

// wake queues a reconcile of every RoutingService that uses c (never blocks: when the queue is
// full, a reconcile is already due).
func (s *Spokes) wake(c *spokeConn) {
	c.mu.Lock()
	users := make([]types.NamespacedName, 0, len(c.users))
	for u := range c.users {
		users = append(users, u)
	}
	c.mu.Unlock()
	for _, u := range users {
		obj := &routingv1alpha1.RoutingService{}
		obj.Namespace, obj.Name = u.Namespace, u.Name
		select {
		case s.events <- event.GenericEvent{Object: obj}:
		default:
		}
	}
}

// errNoSpokes is the message of a shard with a cluster when the manager runs without Spokes.
var errNoSpokes = errors.New("this manager was started without support for shards in other clusters")

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system

// UnnamedHub is the hub identity of a manager that may not read the kube-system namespace and has
// no --hub-id.
const UnnamedHub = "unnamed-hub"

// ResolveHubID returns flag when set, else the UID of the hub's kube-system namespace: stable for
// the life of the cluster and different in a disaster-recovery copy started elsewhere. Errors
// come from reading that namespace.
func ResolveHubID(ctx context.Context, r client.Reader, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: "kube-system"}, &ns); apierrors.IsForbidden(err) {
		// A namespaced install may not read it: every such hub is "unnamed" unless --hub-id
		// names it (docs/clusters.md).
		return UnnamedHub, nil
	} else if err != nil {
		return "", err
	}
	return "kube-system/" + string(ns.UID), nil
}
