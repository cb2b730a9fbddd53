package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pod is one pod the agent runs: a goroutine per container (container.go), the pod's status
// (status.go) and a notifier that pushes every change to virtual-kubelet.
type pod struct {
	prov  *provider
	key   string // namespace/name
	owner string // namespace/name/uid: who holds ip
	dir   string
	ip    string

	mu  sync.Mutex
	ref *corev1.ObjectReference // what events are about
	obj *corev1.Pod             // as created, with metadata from UpdatePod; Status is not kept here
	// specs are the pod's init containers, then its containers: index i < nInit is an init
	// container. statuses, procs and logIndex follow the same order.
	specs    []corev1.Container
	nInit    int
	statuses []corev1.ContainerStatus
	procs    []*process          // each container's current process, nil between runs
	logIndex []int               // each container's current run (its log file's number)
	envs     map[string][]string // each container's environment as last started (exec probes)
	conds    map[corev1.PodConditionType]corev1.PodCondition
	started  metav1.Time
	deleting bool          // DeletePod (or Stop) was called
	grace    time.Duration // the grace period deletion asked for
	finished bool          // deleting and every container has stopped: the phase is final

	stop chan struct{} // closed when deletion begins: no more starts or restarts
	// mainsDone is closed once every regular container has stopped for good: native sidecars
	// (init containers with restartPolicy Always) are then stopped, as the kubelet does.
	mainsDone chan struct{}
	// initFailed is set when a regular init container failed for good: no container starts.
	initFailed bool
	running    sync.WaitGroup
	changed    chan struct{}
	quit       chan struct{} // ends the notifier
	removed    chan struct{} // closed once terminate has finished
}

func newPod(prov *provider, obj *corev1.Pod, ip string) (*pod, error) {
	specs := append(append([]corev1.Container(nil), obj.Spec.InitContainers...), obj.Spec.Containers...)
	n := len(specs)
	p := &pod{
		specs: specs, nInit: len(obj.Spec.InitContainers), mainsDone: make(chan struct{}),
		prov: prov, key: obj.Namespace + "/" + obj.Name, owner: obj.Namespace + "/" + obj.Name + "/" + string(obj.UID),
		dir: filepath.Join(prov.a.stateDir, "pods", fmt.Sprintf("%s_%s_%s", obj.Namespace, obj.Name, obj.UID)),
		ip:  ip, obj: obj.DeepCopy(),
		ref:      &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID},
		statuses: make([]corev1.ContainerStatus, n), procs: make([]*process, n), logIndex: make([]int, n),
		conds: map[corev1.PodConditionType]corev1.PodCondition{}, started: now(), envs: map[string][]string{},
		stop: make(chan struct{}), changed: make(chan struct{}, 1), quit: make(chan struct{}), removed: make(chan struct{}),
	}
	for _, c := range obj.Status.Conditions {
		p.conds[c.Type] = c
	}
	for i, c := range specs {
		if err := os.MkdirAll(filepath.Join(p.dir, c.Name), 0o700); err != nil {
			return nil, err
		}
		waiting := "ContainerCreating"
		if i < p.nInit || len(obj.Spec.InitContainers) > 0 {
			waiting = "PodInitializing"
		}
		p.statuses[i] = corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: new(bool),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
		}
	}
	return p, nil
}

// start launches the containers and the notifier: the init containers first, in order (a regular
// one must exit 0 before the next starts; a native sidecar, restartPolicy Always, must have
// started), then the containers. Once every container has stopped for good, the sidecars are
// stopped (SIGTERM, then SIGKILL after the grace period), as the kubelet does.
func (p *pod) start() {
	go p.notifier()
	p.running.Add(1) // the sequence below
	go func() {
		defer p.running.Done()
		for i := 0; i < p.nInit; i++ {
			done := make(chan struct{})
			p.running.Add(1)
			go func() { defer close(done); p.runContainer(i) }()
			if p.sidecar(i) {
				if !p.waitStarted(i, done) {
					return
				}
				continue
			}
			<-done
			if p.stopping() {
				return
			}
			if p.lastExitCode(i) != 0 {
				p.mu.Lock()
				p.initFailed = true
				p.mu.Unlock()
				p.notify()
				close(p.mainsDone)
				return
			}
		}
		var mains sync.WaitGroup
		for i := p.nInit; i < len(p.specs); i++ {
			p.running.Add(1)
			mains.Add(1)
			go func() { defer mains.Done(); p.runContainer(i) }()
		}
		p.notify()
		mains.Wait()
		close(p.mainsDone)
		p.stopSidecars()
	}()
	p.notify()
	go func() {
		// Every container has stopped for good without a deletion: the pod is Succeeded or
		// Failed and needs its address no more.
		p.running.Wait()
		p.mu.Lock()
		deleting := p.deleting
		p.mu.Unlock()
		if !deleting {
			p.prov.a.ips.release(p.ip, p.owner)
		}
	}()
}

// sidecar reports whether container i is a native sidecar: an init container with
// restartPolicy Always.
func (p *pod) sidecar(i int) bool {
	return i < p.nInit && p.specs[i].RestartPolicy != nil && *p.specs[i].RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// waitStarted waits until sidecar i has started (its startup probe passed, if any); false when
// the pod is deleted first.
func (p *pod) waitStarted(i int, done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		started := *p.statuses[i].Started
		p.mu.Unlock()
		if started {
			return true
		}
		select {
		case <-p.stop:
			return false
		case <-done:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopSidecars ends the native sidecars once the containers have stopped: SIGTERM, then SIGKILL
// after the pod's grace period. They are not restarted (runContainer sees mainsDone).
func (p *pod) stopSidecars() {
	p.mu.Lock()
	var procs []*process
	for i := 0; i < p.nInit; i++ {
		if p.sidecar(i) && p.procs[i] != nil {
			procs = append(procs, p.procs[i])
		}
	}
	grace := podGrace(p.obj)
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, proc := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); proc.terminate(grace) }()
	}
	wg.Wait()
}

// sidecarsStopping reports whether container i is a sidecar whose pod's containers are done.
func (p *pod) sidecarsStopping(i int) bool {
	if !p.sidecar(i) {
		return false
	}
	select {
	case <-p.mainsDone:
		return true
	default:
		return false
	}
}

// notify marks the status changed; the notifier pushes the latest status.
func (p *pod) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// notifier hands each new status to virtual-kubelet in order, one at a time, so that an older
// status can never overtake a newer one.
func (p *pod) notifier() {
	for {
		select {
		case <-p.quit:
			return
		case <-p.changed:
			p.prov.notifyPod(p.snapshot())
		}
	}
}

// snapshot is the pod with its current status.
func (p *pod) snapshot() *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.obj.DeepCopy()
	out.Status = p.statusLocked()
	return out
}

// update takes new labels and annotations (a running process's environment does not change).
func (p *pod) update(obj *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.obj.Labels, p.obj.Annotations = obj.Labels, obj.Annotations
	p.obj.DeletionTimestamp, p.obj.DeletionGracePeriodSeconds = obj.DeletionTimestamp, obj.DeletionGracePeriodSeconds
}

// stopping reports whether deletion has begun.
func (p *pod) stopping() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// sleep waits d, or less if deletion begins; it reports whether the full time passed.
func (p *pod) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.stop:
		return false
	case <-t.C:
		return true
	}
}

// terminate stops the pod as the kubelet does on deletion: SIGTERM to every container's process
// group, SIGKILL after grace, a final status; then, if the pod is still in the API (fromAPI), its
// removal there once that status has been written.
func (p *pod) terminate(grace time.Duration, fromAPI bool) {
	p.mu.Lock()
	if p.deleting {
		// Already terminating: a shorter grace period (Stop's) cuts the first one short.
		procs, shorter := append([]*process(nil), p.procs...), grace < p.grace
		p.mu.Unlock()
		for _, proc := range procs {
			if proc != nil && shorter {
				proc.kill()
			}
		}
		<-p.removed
		return
	}
	p.deleting, p.grace = true, grace
	close(p.stop)
	procs := append([]*process(nil), p.procs...)
	p.mu.Unlock()
	p.notify() // terminating pods stay as they were but no longer restart

	var wg sync.WaitGroup
	for _, proc := range procs {
		if proc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); proc.terminate(grace) }()
		}
	}
	wg.Wait()
	p.running.Wait()
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
	p.notify()
	if fromAPI {
		p.deleteFromAPI()
	}
	close(p.quit)
	p.prov.a.ips.release(p.ip, p.owner)
	p.prov.remove(p)
	close(p.removed)
}

// deleteFromAPI waits (briefly) for the final status to be written, then deletes the pod with
// grace 0, as the kubelet's status manager does once a deleted pod's containers have stopped.
func (p *pod) deleteFromAPI() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods := p.prov.a.client.CoreV1().Pods(p.obj.Namespace)
	for i := 0; i < 50; i++ {
		cur, err := pods.Get(ctx, p.obj.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.obj.UID {
			return // gone already, or a new pod of the same name
		}
		if !anyRunning(cur.Status.ContainerStatuses) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	zero := int64(0)
	err := pods.Delete(ctx, p.obj.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(p.obj.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		p.prov.a.logf("deleting pod %s: %v", p.key, err)
	}
}

func anyRunning(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Running != nil {
			return true
		}
	}
	return false
}

// now is the current time at the API's precision (seconds), so that statuses compare equal
// before and after a round trip.
func now() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }

// event records an event about the pod, as the kubelet does (Started, Unhealthy, Killing…).
func (p *pod) event(eventType, reason, message string) {
	p.prov.recorder.Event(p.ref, eventType, reason, message)
}
