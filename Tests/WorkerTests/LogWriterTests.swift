// The JSON log: one object per line, levels, context, secrets kept out, bursts summarised, the writer
// thread.

import APNs
import JSON
import Synchronization
import TestSupport
import Testing

@testable import Worker

/// Collects what a `LogWriter` writes, as parsed JSON lines.
final class CapturedLog: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    var output: LogWriter.Output { { batch in self.bytes.withLock { $0 += batch } } }

    var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }

    func lines() throws -> [JSONValue] {
        try text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            .map { try JSONValue(parsing: String($0)) }
    }
}

@Suite struct LogWriterTests {
    let captured = CapturedLog()
    let clock = ManualClock()

    func makeWriter(_ configuration: LogWriter.Configuration = .init()) -> LogWriter {
        LogWriter(
            configuration: configuration, output: captured.output, startsWriterThread: false,
            wallClock: { (1_795_953_600, 123_456_789) }, monotonic: clock.read)
    }

    @Test func writesOneJSONObjectPerLineWithTimeLevelMessageAndFields() throws {
        let writer = makeWriter()
        let logger = Logger(writer: writer, context: ["component": "consumer"])
        logger.info("partition assigned", ["topic": "push.requests", "partition": 3])
        logger.warning("quote \" and newline \n stay inside one line")
        writer.flush()
        #expect(
            captured.text.hasPrefix(
                #"{"time":"2026-11-29T12:00:00.123Z","level":"info","message":"partition assigned","fields":{"#))
        let lines = try captured.lines()
        #expect(lines.count == 2)
        #expect(lines[0]["fields"] == ["component": "consumer", "topic": "push.requests", "partition": 3])
        #expect(lines[1]["level"] == "warning")
        #expect(lines[1]["message"] == "quote \" and newline \n stay inside one line")
    }

    @Test func linesBelowTheLevelAreNeitherWrittenNorBuilt() throws {
        let writer = makeWriter(.init(level: .warning))
        let logger = Logger(writer: writer)
        let built = Atomic<Int>(0)
        func expensive() -> String {
            built.add(1, ordering: .relaxed)
            return "details"
        }
        logger.info(expensive())
        logger.debug(expensive())
        logger.error(expensive())
        writer.level = .debug
        logger.debug("now visible")
        writer.flush()
        #expect(built.load(ordering: .relaxed) == 1)
        #expect(try captured.lines().map { $0["level"] } == ["error", "debug"])
    }

    @Test func lineFieldsOverrideContextAndWithAddsContext() throws {
        let writer = makeWriter()
        let logger = Logger(writer: writer, context: ["component": "a"]).with(["pool": "production"])
        logger.info("x", ["component": "b"])
        writer.flush()
        #expect(try captured.lines()[0]["fields"] == ["component": "b", "pool": "production"])
    }

    @Test func neverWritesSecretsInFieldsMessagesOrContext() throws {
        let writer = makeWriter()
        let jwt = "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.eyJpc3MiOiJURUFNMTIzIiwiaWF0IjoxNzAwMDAwMDAwfQ.AbC-dEf_123"
        let pem =
            "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n"
            + "-----END PRIVATE KEY-----"
        let logger = Logger(writer: writer, context: ["sasl.password": "hunter2"])
        logger.error(
            "request failed with authorization: bearer \(jwt)",
            [
                "password": "p4ss", "apiKey": "k-123", "provider_token": .string(jwt), "key_id": "ABC123DEFG",
                "key_file": "/etc/apns/key.p8", "nested": ["client_secret": "s3", "note": .string("key: \(pem) end")],
                "headers": [["name": "authorization", "authorization": "bearer xyz"]],
            ])
        writer.flush()
        let text = captured.text
        for secret in ["hunter2", "p4ss", "k-123", "eyJ", "MIGHAgEA", "BEGIN PRIVATE", "s3\"", "bearer xyz"] {
            #expect(!text.contains(secret), "leaked \(secret)")
        }
        let fields = try captured.lines()[0]["fields"]
        #expect(fields?["key_id"] == "ABC123DEFG")
        #expect(fields?["key_file"] == "/etc/apns/key.p8")
        #expect(fields?["password"] == "[redacted]")
        #expect(fields?["nested"]?["note"] == "key: [redacted pem] end")
        #expect(try captured.lines()[0]["message"] == "request failed with authorization: bearer [redacted jwt]")
    }

    @Test func repeatedErrorsPassABurstThenAreSummarisedWhenTheIntervalEnds() throws {
        let writer = makeWriter(.init(rateLimitBurst: 3, rateLimitInterval: .seconds(10)))
        let logger = Logger(writer: writer)
        for attempt in 0..<50 {
            logger.error("connect to broker failed", ["attempt": .int(Int64(attempt))])
        }
        logger.error("a different error")
        writer.flush()
        var lines = try captured.lines()
        #expect(
            lines.map { $0["message"] } == [
                "connect to broker failed", "connect to broker failed", "connect to broker failed", "a different error",
            ])

        clock.advance(.seconds(11))
        writer.flush()
        lines = try captured.lines()
        #expect(lines.count == 5)
        #expect(lines[4]["message"] == "suppressed 47 repeated log lines")
        #expect(lines[4]["level"] == "error")
        #expect(lines[4]["fields"]?["repeated_message"] == "connect to broker failed")
        #expect(lines[4]["fields"]?["suppressed"] == 47)

        logger.error("connect to broker failed")
        writer.flush()
        #expect(try captured.lines().count == 6)
    }

    @Test func summaryComesFirstWhenTheSameKeyReturnsAfterTheInterval() throws {
        let writer = makeWriter(.init(rateLimitBurst: 1, rateLimitInterval: .seconds(1)))
        let logger = Logger(writer: writer)
        logger.warning("connect to 10.0.0.1 failed", rateLimitKey: "connect failed")
        logger.warning("connect to 10.0.0.2 failed", rateLimitKey: "connect failed")
        clock.advance(.seconds(2))
        logger.warning("connect to 10.0.0.3 failed", rateLimitKey: "connect failed")
        writer.flush()
        #expect(
            try captured.lines().map { $0["message"] } == [
                "connect to 10.0.0.1 failed", "suppressed 1 repeated log lines", "connect to 10.0.0.3 failed",
            ])
    }

    @Test func infoLinesAreNotRateLimitedUnlessGivenAKey() throws {
        let writer = makeWriter(.init(rateLimitBurst: 1))
        let logger = Logger(writer: writer)
        for _ in 0..<5 { logger.info("record processed") }
        for _ in 0..<5 { logger.log(.info, "progress", rateLimitKey: "progress") }
        writer.flush()
        #expect(try captured.lines().count == 6)
    }

    @Test func aFullBufferDropsLinesAndSaysHowMany() throws {
        let writer = makeWriter(.init(bufferCapacity: 4096))
        let logger = Logger(writer: writer)
        let filler = String(repeating: "x", count: 900)
        for index in 0..<10 { logger.info("\(index) \(filler)") }
        writer.flush()
        let lines = try captured.lines()
        #expect(lines.count == 5)
        #expect(lines.last?["message"] == "dropped 6 log lines: the output could not keep up")
        logger.info("after the flush")
        writer.flush()
        #expect(try captured.lines().last?["message"] == "after the flush")
    }

    @Test func theWriterThreadDeliversWithoutAFlushAndCloseWritesTheRest() async throws {
        let writer = LogWriter(output: captured.output)
        let logger = Logger(writer: writer)
        logger.info("first")
        #expect(await eventually { captured.text.contains("first") })
        logger.info("last")
        writer.close()
        #expect(try captured.lines().last?["message"] == "last")
    }

    @Test func concurrentLoggersNeverInterleaveLines() async throws {
        let writer = LogWriter(output: captured.output)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    let logger = Logger(writer: writer, context: ["task": .int(Int64(task))])
                    let payload = JSONValue.string(String(repeating: "y", count: 64))
                    for index in 0..<500 { logger.info("line \(index)", ["payload": payload]) }
                }
            }
        }
        writer.close()
        let lines = try captured.lines()
        #expect(lines.count == 4000)
        for task in 0..<8 {
            let mine = lines.filter { $0["fields"]?["task"] == .int(Int64(task)) }
                .map { $0["message"]?.stringValue ?? "" }
            #expect(mine == (0..<500).map { "line \($0)" })
        }
    }

    @Test(arguments: [("warn", LogLevel.warning), ("INFO", .info), ("critical", .critical)])
    func parsesLevelNames(name: String, level: LogLevel) {
        #expect(LogLevel(name: name) == level)
    }

    @Test func rejectsUnknownLevelNames() {
        #expect(LogLevel(name: "verbose") == nil)
    }
}

@Suite struct LogRedactionTests {
    @Test(arguments: [
        "password", "sasl.password", "ssl.key.password", "client_secret", "authorization", "Authorization",
        "provider_token", "device_token", "apiKey", "private_key", "privateKey", "jwt", "cookie", "p12_passphrase",
    ])
    func treatsSecretishFieldNamesAsSensitive(name: String) {
        #expect(LogRedaction.isSensitiveFieldName(name))
    }

    @Test(arguments: [
        "key_id", "key_file", "password_file", "token_age_seconds", "keyword", "monkey", "topic", "tokenizer",
        "secret_name", "credential_type", "message",
    ])
    func leavesFieldsAboutSecretsAlone(name: String) {
        #expect(!LogRedaction.isSensitiveFieldName(name))
    }

    @Test func scrubsJWTsAndPEMBlocksOutOfText() {
        let jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJUIn0.sig_nature-1"
        #expect(LogRedaction.scrub("a \(jwt) b") == "a [redacted jwt] b")
        #expect(LogRedaction.scrub("x=\(jwt)") == "x=[redacted jwt]")
        #expect(
            LogRedaction.scrub("key -----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY----- tail")
                == "key [redacted pem] tail")
        #expect(LogRedaction.scrub("cut -----BEGIN PRIVATE KEY-----\nMIGH") == "cut [redacted pem]")
        #expect(LogRedaction.scrub("theyJust said eyJ") == "theyJust said eyJ")
        #expect(LogRedaction.scrub("eyJabc.short") == "eyJabc.short")
        #expect(LogRedaction.scrub("plain text") == "plain text")
    }

    @Test func leavesWordsAboutKeysInErrorMessagesWhole() {
        for message in [
            "'/k/AuthKey.p8' is not PEM: no '-----BEGIN PRIVATE KEY-----' line found; check that this is the right file",
            "'/k/cert.der' is binary DER, not PEM text; expected a '-----BEGIN CERTIFICATE-----' block. Convert it",
            "expected -----BEGIN PRIVATE KEY----- then the key",
            "a PEM public key ('-----BEGIN PUBLIC KEY-----'): no PEM block found",
        ] {
            #expect(LogRedaction.scrub(message) == message)
        }
    }

    @Test func stillCutsOutRealPEMBlocksWhereverTheyAre() {
        let body = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"
        let cases = [
            (
                "got -----BEGIN PRIVATE KEY-----\n\(body)\n-----END PRIVATE KEY----- instead",
                "got [redacted pem] instead"
            ),
            ("crlf -----BEGIN PRIVATE KEY-----\r\n\(body)", "crlf [redacted pem]"),
            // Pasted on one line (an environment variable), or quoted with escaped line breaks (JSON).
            ("one -----BEGIN PRIVATE KEY----- \(body) -----END PRIVATE KEY----- two", "one [redacted pem] two"),
            (
                #"json "-----BEGIN EC PRIVATE KEY-----\n"# + body + #"\n-----END EC PRIVATE KEY-----" end"#,
                #"json "[redacted pem]" end"#
            ),
            (
                "legacy -----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n\(body)",
                "legacy [redacted pem]"
            ),
        ]
        for (text, expected) in cases {
            let scrubbed = LogRedaction.scrub(text)
            #expect(scrubbed == expected)
            #expect(!scrubbed.contains(body.prefix(12)))
        }
    }
}
