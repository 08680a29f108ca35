// The error a test fixture throws when its setup fails, with a message saying what went wrong.

package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}
