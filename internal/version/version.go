// Package version holds the build version, set with -ldflags by the Makefile.
package version

// Version is the Switchboard version the binary was built from.
var Version = "dev"
