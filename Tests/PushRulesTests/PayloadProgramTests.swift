// The payload programs must send exactly what the value tree sends: the same bytes (key order, number
// formatting, escaping), the same decisions and problems, the same value when asked. Every rule is
// rendered both ways against the bench's and the pipeline's sample events, and against seeded random
// events full of edge cases.

import APNs
import Foundation
import JSON
import Testing
import WorkerDev

@testable import PushRules

@Suite struct PayloadProgramTests {
    struct Counts {
        /// Payloads the program wrote, each compared with the value tree's bytes.
        var programRenders = 0
        /// Payloads the program left to the value tree (a template error, a value the shape cannot hold).
        var treeRenders = 0
        var decisions = 0
        /// Payload shapes found clean, whose later payloads `evaluate` sent from the program's bytes.
        var cleanShapes = 0
    }

    /// Evaluates each event with the programs (twice: the first learns the payload shapes) and without,
    /// comparing every decision; and renders every rule's payload both ways for the first device.
    static func compareBothWays(
        _ rules: RuleSet, _ events: [JSONValue], now: Int64, seed: UInt64? = nil
    ) -> Counts {
        let treeOnly = rules.withoutPayloadPrograms()
        var counts = Counts()
        let context = seed.map { "seed \($0)" } ?? "fixed events"
        for (index, event) in events.enumerated() {
            _ = rules.evaluate(event, now: now)
            let withPrograms = rules.evaluate(event, now: now).decisions
            let withTrees = treeOnly.evaluate(event, now: now).decisions
            #expect(withPrograms.count == withTrees.count, "event \(index), \(context)")
            for (program, tree) in zip(withPrograms, withTrees) {
                counts.decisions += 1
                let programLine = program.json(includingAPNsID: false).compactString
                let treeLine = tree.json(includingAPNsID: false).compactString
                #expect(programLine == treeLine, "event \(index), \(context): \(event.compactString)")
                if case .send(let a) = program, case .send(let b) = tree {
                    #expect(a.request.payloadBytes == b.request.payloadBytes, "event \(index), \(context)")
                    #expect(a.request.payload == b.request.payload, "event \(index), \(context)")
                }
            }

            let tape = JSONTape(event)
            tape.withRoot { root in
                let renderContext = RenderContext(
                    event: root, device: root["devices"]?.element(at: 0),
                    locale: rules.localization.resolve(event["recipient"]?["locale"]?.stringValue),
                    eventTime: RuleSet.eventTime(of: root, now: now))
                for rule in rules.rules {
                    guard case .send(let plan) = rule.action, let program = plan.payloadProgram else { continue }
                    let tree = try? plan.payload.render(renderContext)
                    if let output = program.render(renderContext) {
                        counts.programRenders += 1
                        #expect(tree != nil, "rule \(rule.id), event \(index), \(context)")
                        if let tree {
                            #expect(
                                String(decoding: output.bytes, as: UTF8.self) == tree.compactString,
                                "rule \(rule.id), event \(index), \(context)")
                            #expect(output.bytes == tree.compactBytes)
                            #expect(
                                output.value(of: plan.payload) == tree, "rule \(rule.id), event \(index), \(context)")
                        }
                    } else {
                        counts.treeRenders += 1
                    }
                }
            }
        }
        for rule in rules.rules {
            if case .send(let plan) = rule.action { counts.cleanShapes += plan.cleanShapeCount }
        }
        return counts
    }

    @Test func theExampleRulesSendTheSameForTheBenchAndPipelineSamples() throws {
        let rules = try RuleSet.load(contentsOf: ExampleRulesTests.examplePath)
        let now = Golden.now
        let stamp = JSONValue.string(RFC3339.format(Double(now - 30)))
        var events = try RulesBenchEvents.all.map { text -> JSONValue in
            guard case .object(var object) = try JSONValue(parsing: text) else { return .null }
            object["occurred_at"] = stamp
            return .object(object)
        }
        var generator = SampleEventGenerator(malformedEvery: 0, seed: 0x5EED)
        for sequence in 0..<400 {
            let record = generator.event(sequence: sequence, occurredAt: Double(now - 60))
            events.append(try JSONValue(parsing: record.value))
        }
        let counts = Self.compareBothWays(rules, events, now: now)
        #expect(counts.programRenders > 1000)
        #expect(counts.cleanShapes >= 5)
        #expect(counts.decisions > 400)
    }

    @Test func textsReadWhereTheyLieInTheEventAreWrittenAsTheTreeWritesThem() throws {
        let rules = try RuleSet.load(contentsOf: ExampleRulesTests.examplePath)
        let treeOnly = rules.withoutPayloadPrograms()
        let token = String(repeating: "ab", count: 32)
        // Escapes of every kind the parser reads, non-ASCII text as it is and escaped, and plain text.
        let texts = [
            #"caf\u00e9 \/ \"quoted\" \\ tab\tnew\nline \ud83d\ude00"#, "Léa 佐藤 👍 plain", "plain ascii text",
            #"control \u0001 and \u001f"#,
        ]
        var programRenders = 0
        for text in texts {
            let record = """
                {"id": "e1", "type": "chat.message", "app": "com.example.chat", "recipient": {"user_id": "u1"},
                 "devices": [{"token": "\(token)", "environment": "production"}],
                 "data": {"sender": {"name": "\(text)"}, "text": "\(text)", "thread_id": "t1", "message_id": "m1"}}
                """
            let tape = try JSONTape(parsing: Array(record.utf8))
            let withPrograms = rules.evaluate(tape, now: Golden.now).decisions
            let withTrees = treeOnly.evaluate(tape, now: Golden.now).decisions
            #expect(withPrograms.count == withTrees.count && !withPrograms.isEmpty, "\(text)")
            for (program, tree) in zip(withPrograms, withTrees) {
                guard case .send(let a) = program, case .send(let b) = tree else {
                    Issue.record("not sent: \(program) for \(text)")
                    continue
                }
                programRenders += 1
                #expect(a.request.payloadBytes == b.request.payloadBytes, "\(text)")
                #expect(a.request.payload == b.request.payload, "\(text)")
            }
        }
        #expect(programRenders >= texts.count)
    }

    @Test func theExampleEventSendsTheSame() throws {
        let rules = try RuleSet.load(contentsOf: ExampleRulesTests.examplePath)
        let event = try JSONValue(parsing: try Data(contentsOf: URL(fileURLWithPath: ExampleRulesTests.eventPath)))
        let counts = Self.compareBothWays(rules, [event], now: Golden.now)
        #expect(counts.programRenders > 0)
    }

    static let edgeRules = """
        version: 1
        localization:
          default_locale: en
          tables:
            en:
              greet: "Hello {{ event.data.name | default('you') }}"
              raw: "{{ event.data.any | default(null) }}"
              plain: 'Just "text" and \\ a backslash'
            fr:
              greet: "Bonjour {{ event.data.name | default('toi') }} « {{ locale }} »"
        rules:
          - id: everything
            match: {type: edge.all}
            app: com.example.edge
            alert:
              title: "{{ event.data.title | default(null) }}"
              subtitle: "{{ event.data.subtitle | default(null) }}"
              body: "{{ event.data.name | default('?') }} said {{ event.data.text | default('') }}"
              loc_args: ["{{ event.data.a | default(null) }}", "{{ event.data.b | default(null) }}", "x\\"y"]
            badge: "{{ event.data.count | default(null) }}"
            sound: "{{ event.data.sound | default(null) }}"
            thread_id: "{{ event.data.thread | default(null) }}"
            relevance_score: "{{ event.data.score | default(null) }}"
            interruption_level: "{{ event.data.level | default(null) }}"
            collapse_id: "{{ event.data.collapse | default(null) }}"
            accept_overrides: [badge, sound, priority, thread_id]
            shorten: alert.body
            custom:
              first: "{{ event.data.any | default(null) }}"
              nested:
                list: ["{{ event.data.any | default(null) }}", 1, null, {k: "{{ event.data.n | default(null) }}"}]
                empty: {}
                also: []
                "quo\\"te": "{{ event.data.text | default(null) }}"
              value: "{{ event.data.n | default(null) }}"
              greeting: "{{ 'greet' | t }}"
              raw: "{{ 'raw' | t }}"
              mixed: "{{ 'greet' | t }} & {{ 'raw' | t }} & {{ 'plain' | t }}!"
              keyed: "{{ event.data.tkey | default('plain') | t }}"
              upper: "{{ 'greet' | t | upper }}"
              pair: "{{ event.data.name | default('') }}/{{ event.data.n | default(0) }}"
              device: "{{ device.environment | default(null) }}"
              ratio: 0.25
          - id: leading-nulls
            match: {type: edge.lead}
            app: com.example.edge
            push_type: background
            custom:
              a: "{{ event.data.a | default(null) }}"
              b: "{{ event.data.b | default(null) }}"
              c: 3
              d: "{{ event.data.n | default(null) }}"
          - id: only-nulls
            match: {type: edge.none}
            app: com.example.edge
            alert: {title: "{{ event.data.title | default(null) }}", body: "{{ event.data.text | default(null) }}"}
            sound: {name: "{{ event.data.sound | default(null) }}", volume: "{{ event.data.score | default(1) }}"}
          - id: live
            match: {type: edge.live}
            app: com.example.edge
            push_type: liveactivity
            alert: {title: "{{ event.data.title | default('t') }}"}
            relevance_score: "{{ event.data.score | default(null) }}"
            live_activity:
              event: update
              content_state: "{{ event.data.state | default(null) }}"
              stale_date: "{{ event.data.stale | default(null) }}"
          - id: live-tree
            match: {type: edge.livetree}
            app: com.example.edge
            push_type: liveactivity
            live_activity:
              event: end
              content_state:
                status: "{{ event.data.any | default(null) }}"
                count: "{{ event.data.count | default(null) }}"
              dismissal_date: "{{ event.data.stale | default(null) }}"
          - id: live-start
            match: {type: edge.livestart}
            app: com.example.edge
            push_type: liveactivity
            alert: {title: "{{ event.data.title | default('t') }}"}
            live_activity:
              event: start
              attributes_type: Attributes
              attributes: {n: "{{ event.data.n | default(null) }}"}
              content_state: {s: "{{ event.data.text | default(null) }}"}
          - id: web
            match: {type: edge.web}
            topic: "{{ event.data.topic | default('web.com.example') }}"
            alert: {title: "{{ event.data.title | default(null) }}", body: "{{ event.data.text | default(null) }}"}
        """

    /// Texts that need escaping or are not ASCII, and the words the payload checks compare.
    static let texts: [String] = [
        "", "plain", "with \"quotes\"", "back\\slash", "line\nbreak\r\n", "tab\tand\u{08}\u{0C}", "\u{00}\u{01}\u{1F}",
        "\u{7F}", "émoji 🎉👍🏽", "日本語", "e\u{301}", "</script>", "passive", "critical", "start", "update", "end",
        "default", "12", " 7 ", "0.5", "2026-11-29T12:00:00Z", "1e3", "true", "null",
        String(repeating: "long text ", count: 500),
    ]

    static let numbers: [JSONValue] = [
        .int(0), .int(1), .int(2), .int(-1), .int(99_999_999_999), .int(100_000_000_000), .int(Int64.max),
        .int(Int64.min), .double(0.5), .double(1.0), .double(-0.25), .double(1e-7), .double(1e21), .double(3.0),
        .double(0.1 + 0.2), .double(-0.0), .double(123_456_789.125), .double(1e15), .double(9.5e14),
    ]

    struct Random {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }

        mutating func text() -> String {
            if next(3) == 0 { return PayloadProgramTests.texts[next(PayloadProgramTests.texts.count)] }
            let pieces = ["a", "\"", "\\", "\n", "\u{0}", "\u{1B}", "é", "🎉", " ", "€", "\u{2028}", "z9"]
            return (0..<next(12)).map { _ in pieces[next(pieces.count)] }.joined()
        }

        mutating func value(depth: Int = 0) -> JSONValue? {
            switch next(depth > 1 ? 6 : 8) {
            case 0: return nil
            case 1: return .null
            case 2, 3: return .string(text())
            case 4: return PayloadProgramTests.numbers[next(PayloadProgramTests.numbers.count)]
            case 5: return .bool(next(2) == 0)
            case 6: return .array((0..<next(4)).map { _ in value(depth: depth + 1) ?? .null })
            default:
                var object = JSONObject()
                for key in ["x", "q\"k", "é"].prefix(next(4)) { object[key] = value(depth: depth + 1) ?? .null }
                return .object(object)
            }
        }
    }

    static func randomEvents(seed: UInt64, count: Int, now: Int64) -> [JSONValue] {
        var random = Random(state: seed)
        let types = ["edge.all", "edge.lead", "edge.none", "edge.live", "edge.livetree", "edge.livestart", "edge.web"]
        let keys = [
            "title", "subtitle", "name", "text", "a", "b", "count", "sound", "thread", "score", "level",
            "collapse", "any", "n", "state", "stale", "topic", "tkey",
        ]
        let locales: [JSONValue] = ["en", "fr-CA", "de", .null, .int(3)]
        return (0..<count).map { index in
            var data = JSONObject()
            for key in keys {
                if let value = random.value() { data[key] = value }
                // Values of the type the field converts from, so that more payloads render.
                if random.next(3) == 0 {
                    switch key {
                    case "count": data[key] = random.next(2) == 0 ? .int(Int64(random.next(50))) : .string("4")
                    case "score": data[key] = [.double(0.5), .int(1), .string("0.75"), .double(7.5)][random.next(4)]
                    case "level": data[key] = .string(APNsPayload.interruptionLevels[random.next(4)])
                    case "state": data[key] = ["step": .string(random.text()), "n": .int(Int64(random.next(9)))]
                    case "stale": data[key] = [.int(now + 600), .string("2026-11-29T12:00:00Z")][random.next(2)]
                    case "topic": data[key] = .string(["web.com.example", "com.example.edge"][random.next(2)])
                    case "tkey": data[key] = .string(["greet", "raw", "plain", "missing"][random.next(4)])
                    default: data[key] = .string(random.text())
                    }
                }
            }
            var event: JSONObject = [
                "id": .string("evt-\(index)"), "type": .string(types[random.next(types.count)]),
                "recipient": ["locale": locales[random.next(locales.count)]],
                "devices": [
                    ["token": .string(String(repeating: "ab", count: 32)), "environment": "production"],
                    ["token": .string(String(repeating: "cd", count: 32)), "environment": "sandbox"],
                ],
                "data": .object(data),
            ]
            switch random.next(4) {
            case 0: break
            case 1: event["occurred_at"] = .string(RFC3339.format(Double(now - 5)))
            case 2: event["occurred_at"] = .string("yesterday")
            default: event["occurred_at"] = .string(RFC3339.format(Double(now - Int64(random.next(100_000)))))
            }
            if random.next(4) == 0 {
                event["channels"] = [["id": "aMs2y8fFEe8AAPIAM4gHog==", "environment": "production"]]
            }
            if random.next(3) == 0 {
                var apns = JSONObject()
                let overrides: [(String, JSONValue)] = [
                    ("badge", .int(2)), ("badge", .string("x")), ("sound", "ping"), ("priority", .int(5)),
                    ("thread_id", "t"), ("category", "C"), ("expiration", .int(0)), ("nonsense", .int(1)),
                ]
                for _ in 0..<(1 + random.next(2)) {
                    let (key, value) = overrides[random.next(overrides.count)]
                    apns[key] = value
                }
                event["apns"] = .object(apns)
            }
            return .object(event)
        }
    }

    @Test func edgeCaseRulesSendTheSameForRandomEvents() throws {
        let rules = try RuleSet(text: Self.edgeRules)
        let seed =
            ProcessInfo.processInfo.environment["PAYLOAD_PROGRAM_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max)
        // The seed, to replay a failure with PAYLOAD_PROGRAM_SEED=<seed>.
        print("PayloadProgramTests random events: seed \(seed)")
        let events = Self.randomEvents(seed: seed, count: 3000, now: Golden.now)
        let counts = Self.compareBothWays(rules, events, now: Golden.now, seed: seed)
        #expect(counts.programRenders > 3000, "seed \(seed)")
        #expect(counts.treeRenders > 100, "seed \(seed)")
        #expect(counts.cleanShapes > 20, "seed \(seed)")
    }

    @Test func everyClassOfACheckedLeafFitsTheFiveBitsOfAShape() {
        #expect(16 + APNsPayload.comparedTexts.count <= 32)
        let values: [JSONValue] = [
            .null, true, false, -3, 0, 1, 7, 100_000_000_000, -0.5, 0.5, 2.5, 1e12, "x", [], [:],
        ]
        let texts: [JSONValue] = APNsPayload.comparedTexts.map { .string($0) }
        for value in values + texts {
            #expect((APNsPayload.checkedClass(of: value, typeOnly: true) ?? 0) < 32)
        }
    }

    @Test func aMemberWhoseTemplateGivesNullIsLeftOutWithItsComma() throws {
        let rules = try RuleSet(text: Self.edgeRules)
        let event: JSONValue = [
            "id": "e", "type": "edge.lead",
            "devices": [
                [
                    "token": .string(String(repeating: "ab", count: 32)),
                    "environment": "production",
                ]
            ], "data": ["b": "B"],
        ]
        guard case .send(let plan) = rules.rules[1].action, let program = plan.payloadProgram else {
            Issue.record("leading-nulls has no payload program")
            return
        }
        let rendered = JSONTape(event).withRoot { root in
            program.render(
                RenderContext(
                    event: root, device: nil, locale: ResolvedLocale(tag: "", tables: []), eventTime: .success(0)))
        }
        let output = try #require(rendered)
        #expect(String(decoding: output.bytes, as: UTF8.self) == #"{"aps":{"content-available":1},"b":"B","c":3}"#)
        #expect(Self.compareBothWays(rules, [event], now: Golden.now).programRenders > 0)
    }
}
