// Package measure takes the measurements of spec.strategy.checks[] http and prometheus checks
// (issue 11) for the reconciler: the planner (pkg/rollout) is pure and asks for them in
// Plan.Measurements. Every measurement is bounded by the check's timeoutSeconds, reads at most
// MaxBody bytes of a response, and never panics on what a server returns: a server's answer is
// untrusted input.
//
// Outcomes follow Argo Rollouts' AnalysisRun measurements: Successful, Failed, Inconclusive (no
// data), or Error (the measurement could not be taken). A result no retry can change (a URL or a
// condition that does not parse, a query Prometheus rejects as bad_data) is Fatal: the check
// fails at once with that message instead of after consecutiveErrorLimit errors.
package measure
