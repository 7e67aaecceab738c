// The sandbox ("pause") container of the real-node run: holds the Pod's namespaces and
// sleeps until signalled. Built here, because nothing may be pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the sandbox it also reaps any zombie reparented to it.
	signal.Ignore(syscall.SIGCHLD)
	<-stop
}
