// sbomprobe is a Go program that links one module besides the standard library, for
// TestSBOMListsWhatIsLinked to read the build information of.
package main

import (
	"fmt"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

func main() { fmt.Println(cdx.SpecVersion1_6) }
