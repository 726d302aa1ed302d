//go:build !unix

package testkit

import "os"

// terminate is the signal Terminate sends: where there is no SIGTERM, a
// kill.
var terminate = os.Kill
