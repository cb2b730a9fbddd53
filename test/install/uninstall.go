package install

// ManagerSelector is the label selector that picks, among the objects of dist/install.yaml (and
// of config/default), the manager's: its Deployment, ServiceAccount, RBAC and metrics Service,
// never the CRD or the namespace. `make undeploy` and docs/install.md delete with
// `kubectl delete -f dist/install.yaml -l <ManagerSelector>` (kubectl filters a file's objects by
// -l), which keeps the CRD and so every RoutingService with its ReplicaSets and pods.
const ManagerSelector = "app.kubernetes.io/name=schemagate"
