package controllers

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// isRefusal reports whether err is the API server refusing a write for what it is, an answer that
// a retry of the same request cannot change: 400 Bad Request, 403 Forbidden (RBAC, an admission
// policy or webhook, a ResourceQuota, a namespace being deleted), 413 Request Entity Too Large and
// 422 Invalid. Conflicts, AlreadyExists, throttling, timeouts and server errors are not refusals:
// they are retried (controller-runtime's backoff, or the requeue the reconciler asks for).
func isRefusal(err error) bool {
	return err != nil && (apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsRequestEntityTooLargeError(err) || apierrors.IsInvalid(err))
}

// refusalOf turns an action the API server refused into a rollout.Refusal; ok is false for any
// other error.
func refusalOf(err error) (rollout.Refusal, bool) {
	var ae *actionError
	if !errors.As(err, &ae) || !isRefusal(err) {
		return rollout.Refusal{}, false
	}
	a := ae.action
	r := rollout.Refusal{Message: apiMessage(err)}
	switch a.Kind {
	case rollout.CreateReplicaSet, rollout.CreateJob, rollout.CreateRecord:
		r.Verb = "create"
	case rollout.DeleteReplicaSet, rollout.DeleteJob, rollout.DeleteRecord:
		r.Verb = "delete"
	default:
		r.Verb = "patch"
	}
	switch {
	case a.Job != nil:
		r.Kind, r.Name = "Job", a.Job.Name
	case a.ReplicaSet != nil:
		r.Kind, r.Name = "ReplicaSet", a.ReplicaSet.Name
	case a.Record != nil:
		r.Kind, r.Name = "ControllerRevision", a.Record.Name
	}
	return r, true
}

// apiMessage is the server's own message of err (its Status message), without the client's
// wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if m := status.Status().Message; m != "" {
			return m
		}
	}
	return err.Error()
}
