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

	mu       sync.Mutex
	ref      *corev1.ObjectReference // what events are about
	obj      *corev1.Pod             // as created, with metadata from UpdatePod; Status is not kept here
	statuses []corev1.ContainerStatus
	procs    []*process // each container's current process, nil between runs
	logIndex []int      // each container's current run (its log file's number)
	conds    map[corev1.PodConditionType]corev1.PodCondition
	started  metav1.Time
	deleting bool          // DeletePod (or Stop) was called
	grace    time.Duration // the grace period deletion asked for
	finished bool          // deleting and every container has stopped: the phase is final

	stop    chan struct{} // closed when deletion begins: no more starts or restarts
	running sync.WaitGroup
	changed chan struct{}
	quit    chan struct{} // ends the notifier
	removed chan struct{} // closed once terminate has finished
}

func newPod(prov *provider, obj *corev1.Pod, ip string) (*pod, error) {
	n := len(obj.Spec.Containers)
	p := &pod{
		prov: prov, key: obj.Namespace + "/" + obj.Name, owner: obj.Namespace + "/" + obj.Name + "/" + string(obj.UID),
		dir: filepath.Join(prov.a.stateDir, "pods", fmt.Sprintf("%s_%s_%s", obj.Namespace, obj.Name, obj.UID)),
		ip:  ip, obj: obj.DeepCopy(),
		ref:      &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID},
		statuses: make([]corev1.ContainerStatus, n), procs: make([]*process, n), logIndex: make([]int, n),
		conds: map[corev1.PodConditionType]corev1.PodCondition{}, started: now(),
		stop: make(chan struct{}), changed: make(chan struct{}, 1), quit: make(chan struct{}), removed: make(chan struct{}),
	}
	for _, c := range obj.Status.Conditions {
		p.conds[c.Type] = c
	}
	for i, c := range obj.Spec.Containers {
		if err := os.MkdirAll(filepath.Join(p.dir, c.Name), 0o700); err != nil {
			return nil, err
		}
		p.statuses[i] = corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: new(bool),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}
	}
	return p, nil
}

// start launches the containers and the notifier.
func (p *pod) start() {
	go p.notifier()
	for i := range p.obj.Spec.Containers {
		p.running.Add(1)
		go p.runContainer(i)
	}
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
