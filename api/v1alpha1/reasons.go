package v1alpha1

// Condition reasons added by the second scenario round (S-15, S-20, S-21, S-22).
const (
	// ReasonNameConflict: an object with the deterministic name schemagate needs (a migration Job or
	// a shard's ReplicaSet) exists and is not controlled by this RoutingService. It is never taken as
	// evidence or adopted as a revision; Stalled=True names it until the name is free (S-20, S-21).
	ReasonNameConflict = "NameConflict"
	// ReasonTemplateMismatch: a ReplicaSet this RoutingService controls carries the update
	// revision's name and labels but runs another pod template (a hand edit, or a hash collision).
	// It is never counted as the revision; Stalled=True names it and the first difference (S-22).
	ReasonTemplateMismatch = "TemplateMismatch"
	// ReasonWaitingForMigration: the required schema's migration waits for another migration Job of
	// this RoutingService (an earlier version's) to end, since two migrations never run at once (S-15).
	ReasonWaitingForMigration = "WaitingForMigration"
)
