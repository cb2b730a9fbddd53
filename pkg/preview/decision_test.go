package preview

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// decideAt is plan's clock in these tests.
var decideAt = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// steady is the sample as the manager leaves it once a rollout is complete, with everything plan
// reads: the live object (its spec runs image on schema version, declaring compat; status Ready),
// its ReplicaSets (one per shard, all pods available, recording the range rng, served-order set),
// its revision record, and the migration Job that brought the database to db with its pod's
// schema report. Times are a day before decideAt.
func steady(t *testing.T, image, version string, compat *routingv1alpha1.SchemaCompatibility, rng [2]string, db string) (*routingv1alpha1.RoutingService, Read) {
	t.Helper()
	then := metav1.NewTime(decideAt.Add(-24 * time.Hour))
	l := live(t)
	l.UID, l.Generation, l.CreationTimestamp = types.UID("uid-edge-router"), 1, then
	l.Spec.Template.Spec.Containers[0].Image = image
	l.Spec.Schema.Version = version
	l.Spec.Schema.Compatibility = compat
	rev := rollout.Revision(&l.Spec)
	var read Read

	job := rollout.NewMigrationJob(l, db, 1)
	job.UID, job.CreationTimestamp = types.UID("uid-"+job.Name), then
	done := metav1.NewTime(then.Add(time.Minute))
	job.Status = batchv1.JobStatus{Succeeded: 1, StartTime: &then, CompletionTime: &done, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: done},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: done}}}
	report := `{"schemagate":"schema-report/v1","version":"` + db + `","dirty":false,"tool":"golang-migrate","time":"` + done.UTC().Format(time.RFC3339) + `"}`
	read.Jobs = append(read.Jobs, *job)
	read.Pods = append(read.Pods, corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-bq7xk", Namespace: l.Namespace, Labels: job.Spec.Template.Labels, CreationTimestamp: then,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: job.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: report}}}}},
	})

	record := rollout.NewRevisionRecord(l, rev, 1)
	record.UID, record.CreationTimestamp = types.UID("uid-"+record.Name), then
	read.ControllerRevisions = append(read.ControllerRevisions, *record)

	st := &l.Status
	st.ObservedGeneration = 1
	st.StableRevision, st.UpdateRevision, st.PromotedShards = rev, rev, "3/3"
	st.Schema = routingv1alpha1.SchemaStatus{RequiredVersion: version, ConfirmedVersion: db, ConfirmedBy: job.Name,
		ReportedVersion: db, ReportedBy: job.Name + " (golang-migrate)", MigrationJob: job.Name, Attempt: 1, StartTime: &then, CompletionTime: &done}
	for i, sh := range l.Spec.Shards {
		rs := rollout.NewReplicaSet(l, sh, rev, sh.Replicas)
		rs.UID, rs.CreationTimestamp, rs.Generation = types.UID("uid-"+rs.Name), metav1.NewTime(done.Add(time.Duration(i)*time.Minute)), 1
		if rng[0] != "" {
			rs.Annotations[annotationSchemaMin] = rng[0]
		}
		if rng[1] != "" {
			rs.Annotations[annotationSchemaMax] = rng[1]
		}
		rollout.SetServedOrder(rs, int64(i+1))
		rs.Status = appsv1.ReplicaSetStatus{Replicas: sh.Replicas, FullyLabeledReplicas: sh.Replicas, ReadyReplicas: sh.Replicas,
			AvailableReplicas: sh.Replicas, ObservedGeneration: 1}
		read.ReplicaSets = append(read.ReplicaSets, *rs)
		promoted := metav1.NewTime(rs.CreationTimestamp.Add(2 * time.Minute))
		st.Shards = append(st.Shards, routingv1alpha1.ShardStatus{Name: sh.Name, Revision: rev, Step: routingv1alpha1.ShardStepPromoted,
			StepRevision: rev, StepStartTime: &promoted, Replicas: sh.Replicas, Updated: sh.Replicas, Ready: sh.Replicas, Available: sh.Replicas})
	}
	for _, c := range []metav1.Condition{
		{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: routingv1alpha1.ReasonRolloutComplete},
		{Type: routingv1alpha1.ConditionReconciling, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonRolloutComplete},
		{Type: routingv1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonRolloutComplete},
		{Type: routingv1alpha1.ConditionSchemaReady, Status: metav1.ConditionTrue, Reason: routingv1alpha1.ReasonSchemaConfirmed},
	} {
		c.ObservedGeneration, c.LastTransitionTime = 1, done
		st.Conditions = append(st.Conditions, c)
	}
	return l, read
}

// v1 is the steady sample on image v1 and schema 1, its revision declaring the range [lo, hi]
// and its ReplicaSets recording it.
func v1(t *testing.T, lo, hi string) (*routingv1alpha1.RoutingService, Read) {
	return steady(t, "registry.example/edge-router:v1", "1", compat(lo, hi), [2]string{lo, hi}, "1")
}

// The manager's first decision of a manifest, each case a change someone might merge against a
// live object plan read in full (or none): what the planner decides (SchemaReady, Stalled, the
// migration Job, the shards it touches first), the risk on spec.schema.version it gives, and
// whether plan refuses (exits non-zero). Each preview is pinned in testdata/decision-<name>.golden.
func TestDecision(t *testing.T) {
	type want struct {
		reason          string // SchemaReady's reason
		stalled         string // Stalled's reason when True, "" for none
		startsMigration bool
		binaryFirst     bool
		shards          string // the shards touched first, comma-separated
		risk            string // the start of the spec.schema.version risk, "" for none
		refused         bool
	}
	cases := map[string]struct {
		world func(t *testing.T) (*routingv1alpha1.RoutingService, Read)
		next  func(t *testing.T) *routingv1alpha1.RoutingService
		want  want
		// old, when set, checks what this preview's own model said without the Decision: the
		// cases where the two disagree, and the Decision wins.
		old func(t *testing.T, old, decided Preview)
	}{
		// (a) v1 serves every shard and runs on [1, 1]; v2 needs schema 2 and runs on [2, 2]
		// only: the migration is refused before its Job exists, in the planner's words.
		"incompatible": {
			func(t *testing.T) (*routingv1alpha1.RoutingService, Read) { return v1(t, "1", "1") },
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "2"), "") },
			want{reason: routingv1alpha1.ReasonIncompatibleRevision, stalled: routingv1alpha1.ReasonIncompatibleRevision,
				risk: "manager's decision (SchemaReady=False IncompatibleRevision): the migration to schema 2 is refused before its Job exists: revision ", refused: true},
			nil,
		},
		// (b) v1 runs on [1, 2]: the expand to 2 may start, and its Job is the first action.
		"compatible": {
			func(t *testing.T) (*routingv1alpha1.RoutingService, Read) { return v1(t, "1", "2") },
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "") },
			want{reason: routingv1alpha1.ReasonMigrating, startsMigration: true},
			nil,
		},
		// (c) v1 runs on [1, 1], v2 on [1, 2], which holds the database's schema 1: binary
		// first, us-east gets v2 before any migration.
		"binary-first": {
			func(t *testing.T) (*routingv1alpha1.RoutingService, Read) { return v1(t, "1", "1") },
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("1", "2"), "") },
			want{reason: routingv1alpha1.ReasonMigrationPending, binaryFirst: true, shards: "us-east"},
			// (e) plan's own reading of the ranges said this migration is refused
			// (IncompatibleRevision) and exited non-zero; the planner rolls the shards first.
			func(t *testing.T, old, decided Preview) {
				if !hasRisk(old, "(IncompatibleRevision): revision ") || old.Refused == "" {
					t.Errorf("the old model no longer refuses binary first: %+v", old.Risks)
				}
				if hasRisk(decided, "IncompatibleRevision") {
					t.Errorf("the decided preview still says IncompatibleRevision: %+v", decided.Risks)
				}
			},
		},
		// (e) v1 runs on [1, 2], v2 on [1, 3]: plan's own model said binary first (v2 runs on
		// the database's schema 1), but nothing that serves excludes 2, so the planner starts
		// the migration first and no shard moves before it is confirmed.
		"migration-first": {
			func(t *testing.T) (*routingv1alpha1.RoutingService, Read) { return v1(t, "1", "2") },
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("1", "3"), "") },
			want{reason: routingv1alpha1.ReasonMigrating, startsMigration: true},
			func(t *testing.T, old, decided Preview) {
				if !old.Lifecycle.BinaryFirst || decided.Lifecycle.BinaryFirst {
					t.Errorf("binary first: old model %v, decided %v; want true, false", old.Lifecycle.BinaryFirst, decided.Lifecycle.BinaryFirst)
				}
			},
		},
		// (d) A new RoutingService: the planner on the manifest alone starts the migration.
		"new": {
			func(*testing.T) (*routingv1alpha1.RoutingService, Read) { return nil, Read{} },
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "") },
			want{reason: routingv1alpha1.ReasonMigrating, startsMigration: true},
			nil,
		},
		// The manifest as applied: nothing to do.
		"unchanged": {
			func(t *testing.T) (*routingv1alpha1.RoutingService, Read) { return v1(t, "1", "2") },
			func(t *testing.T) *routingv1alpha1.RoutingService {
				l, _ := v1(t, "1", "2")
				n := sample(t)
				n.Spec = l.Spec
				return n
			},
			want{reason: routingv1alpha1.ReasonSchemaConfirmed},
			nil,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, read := c.world(t)
			next := c.next(t)
			p := ComputeDecided(l, next, read, decideAt)
			d := p.Decision
			if d == nil {
				t.Fatalf("no decision: %s", p.Undecided)
			}
			stalled := ""
			if d.Stalled != nil {
				stalled = d.Stalled.Reason
			}
			got := want{reason: d.SchemaReady.Reason, stalled: stalled, startsMigration: d.StartsMigration, binaryFirst: d.BinaryFirst,
				shards: strings.Join(d.Shards, ","), refused: p.Refused != ""}
			for _, r := range p.Risks {
				if r.Field == "spec.schema.version" && strings.HasPrefix(r.Message, c.want.risk) && c.want.risk != "" {
					got.risk = c.want.risk
					if !strings.Contains(r.Message, d.SchemaReady.Message) {
						t.Errorf("the risk does not carry the planner's message %q: %s", d.SchemaReady.Message, r.Message)
					}
				}
			}
			if got != c.want {
				t.Errorf("decision %+v\nwant     %+v\nrisks %+v", got, c.want, p.Risks)
			}
			if c.want.risk == "" && hasRisk(p, "IncompatibleRevision") {
				t.Errorf("a migration the manager starts is flagged: %+v", p.Risks)
			}
			if c.old != nil {
				c.old(t, ComputeWith(l, next, read.ReplicaSets), p)
			}
			var out bytes.Buffer
			if err := p.Write(&out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "Manager's first decision (its planner, on what plan read):\n  SchemaReady:  ") {
				t.Errorf("no decision section:\n%s", out.String())
			}
			b, err := json.Marshal(p)
			if err != nil || !strings.Contains(string(b), `"decision":{"now":"2026-12-02T12:00:00Z"`) {
				t.Errorf("-o json: %v\n%s", err, b)
			}
			golden(t, "decision-"+name, out.Bytes())
		})
	}
}

// No decision where plan cannot see what the manager sees: a shard in another cluster (of the
// manifest or the live object), a list plan could not read. The preview says why in one line,
// and its own reading of the ranges still flags (and refuses) a migration it finds refused.
func TestNoDecision(t *testing.T) {
	cases := map[string]struct {
		edit func(l, n *routingv1alpha1.RoutingService, read *Read)
		want string
	}{
		"manifest shard in another cluster": {func(_, n *routingv1alpha1.RoutingService, _ *Read) { inClusters(n) },
			"shard eu-west runs in cluster eu-1, and plan reads only the RoutingService's own cluster"},
		"live shard in another cluster": {func(l, _ *routingv1alpha1.RoutingService, _ *Read) {
			l.Spec.Shards[2].Cluster = &routingv1alpha1.ShardCluster{Name: "ap-1"}
		}, "shard ap-south runs in cluster ap-1"},
		"ran in other clusters": {func(l, _ *routingv1alpha1.RoutingService, _ *Read) {
			l.Annotations = map[string]string{routingv1alpha1.AnnotationClustersUsed: "ap-1"}
		}, "its shards ran in other clusters (schemagate.io/clusters-used)"},
		"jobs not listed": {func(_, _ *routingv1alpha1.RoutingService, read *Read) { read.Jobs, read.Unread = nil, "jobs" },
			"plan could not list its jobs"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, read := v1(t, "1", "1")
			next := v2(t, "2", compat("2", "2"), "")
			c.edit(l, next, &read)
			p := ComputeDecided(l, next, read, decideAt)
			if p.Decision != nil || p.Undecided == "" || !strings.Contains(p.Undecided, c.want) {
				t.Fatalf("decision %+v, undecided %q; want none, because %q", p.Decision, p.Undecided, c.want)
			}
			var out bytes.Buffer
			if err := p.Write(&out); err != nil {
				t.Fatal(err)
			}
			if line := "Manager's first decision: not computed: " + p.Undecided + "\n"; !strings.Contains(out.String(), line) {
				t.Errorf("preview lacks %q:\n%s", line, out.String())
			}
			if !hasRisk(p, "is refused before its Job exists (IncompatibleRevision)") || !strings.HasPrefix(p.Refused, "IncompatibleRevision, by plan's own reading") {
				t.Errorf("without a decision the old model's refusal is lost: refused %q, risks %+v", p.Refused, p.Risks)
			}
		})
	}
}

// hasRisk says whether a risk's message contains s.
func hasRisk(p Preview, s string) bool {
	for _, r := range p.Risks {
		if strings.Contains(r.Message, s) {
			return true
		}
	}
	return false
}
