import Foundation
import PushRules
import Testing
@testable import Worker

@Suite struct EmbeddedRulesTests {
    @Test func embeddedExampleRulesMatchTheExampleFile() throws {
        let path = #filePath.replacingOccurrences(of: "Tests/WorkerTests/EmbeddedRulesTests.swift", with: "examples/rules.yaml")
        let file = try String(contentsOfFile: path, encoding: .utf8)
        #expect(file == embeddedExampleRules, "copy examples/rules.yaml into Sources/Worker/Dev/EmbeddedExampleRules.swift")
        _ = try RuleSet(text: embeddedExampleRules)
    }
}
