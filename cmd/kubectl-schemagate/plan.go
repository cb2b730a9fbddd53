package main

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// newPlanCommand is `kubectl schemagate plan -f FILE [NAME]` (issue 12): what applying FILE would
// do. Work in progress: the preview is being built in pkg/preview.
func newPlanCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	_ = flags
	_ = streams
	return &cobra.Command{
		Use:   "plan -f FILE [NAME]",
		Short: "Show what applying FILE would do to a RoutingService: revision, migration, shards, duration, risks",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("plan is not built yet")
		},
	}
}
