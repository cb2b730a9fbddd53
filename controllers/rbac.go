package controllers

// RBAC of the secure metrics endpoint (--metrics-secure, ManagerConfig.MetricsSecure): the manager
// asks the API server who a scraper's bearer token belongs to (TokenReview) and whether that
// identity may `get` the non-resource URL /metrics (SubjectAccessReview). Both are cluster-scoped,
// so even a manager restricted to some namespaces (--watch-namespaces) needs them in a ClusterRole
// when its metrics are secure. The rule comes from controller-runtime's
// pkg/metrics/filters.WithAuthenticationAndAuthorization.

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
