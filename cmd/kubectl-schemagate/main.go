// Command kubectl-schemagate is the kubectl plugin for RoutingServices (issue 12).
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{Use: "kubectl-schemagate", SilenceUsage: true}
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newPlanCommand(flags, streams))
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
