// The example rules `dev` and `bench pipeline` run with: examples/rules.yaml, embedded by SwiftPM
// (Resources/rules.yaml links to it), so that the binary needs no file beside it and the two cannot drift.

/// The text of examples/rules.yaml as it was when this binary was built.
package let embeddedExampleRules = String(decoding: PackageResources.rules_yaml, as: UTF8.self)
