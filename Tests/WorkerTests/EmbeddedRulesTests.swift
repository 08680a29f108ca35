// The rules built into the executable are the example file, not a copy that drifts.

import Foundation
import PushRules
import Testing
import WorkerDev

@Suite struct EmbeddedRulesTests {
    /// SwiftPM embeds examples/rules.yaml through the link in Sources/WorkerDev/Resources; this proves the
    /// link still points at the file and that `dev` starts with rules that compile.
    @Test func embeddedExampleRulesAreTheExampleFile() throws {
        let path = #filePath.replacingOccurrences(
            of: "Tests/WorkerTests/EmbeddedRulesTests.swift", with: "examples/rules.yaml")
        let file = try String(contentsOfFile: path, encoding: .utf8)
        #expect(file == embeddedExampleRules, "Sources/WorkerDev/Resources/rules.yaml must link to examples/rules.yaml")
        _ = try RuleSet(text: embeddedExampleRules)
    }
}
