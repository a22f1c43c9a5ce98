// Command kubectl is kubectl at the test bed's release, built from k8s.io/kubectl
// (the same main as k8s.io/kubernetes/cmd/kubectl, without the cloud auth plugins:
// the bed's kubeconfigs carry client certificates and tokens). The tests and the
// release's downstream step run this one, never a kubectl from the machine's PATH.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// The verbosity is read before the flags are parsed, as kubectl's own main
	// does, so that klog logs at that level while the command is built.
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
