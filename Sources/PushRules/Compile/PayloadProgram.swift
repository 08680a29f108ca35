// A rule's payload compiled, at load, into steps that write its compact JSON bytes straight from an
// event: constant subtrees are encoded once into byte chunks, and only the template leaves (and the
// event time) are rendered per event. The bytes are exactly `ValueTemplate.render(_:)`'s value as
// `JSONWriter` encodes it; anything the steps cannot do the same way (a template error) gives nil,
// and the caller renders the value tree instead.

import APNs
import JSON

struct PayloadProgram: Sendable {
    /// How a leaf takes part in the payload checks' answer (see `APNsPayload.checkedClass(of:typeOnly:)`).
    enum Checked: Sendable {
        /// Outside `aps`, or inside a key whose value the checks only type: they never read it.
        case unread
        /// The value of a key whose value the checks only type (`content-state`, `attributes`).
        case typeOnly
        /// Anywhere else under `aps`.
        case classified
    }

    /// A trivial value: bytes are views into the program's `storage`, and leaves are indexes into `values`
    /// and `texts`, so that reading a step copies nothing (binding an array or a template out of an enum
    /// case retained it, per step and per render).
    enum Step: @unchecked Sendable {
        case bytes(UnsafeBufferPointer<UInt8>)
        /// A `,` unless the byte before is the container's opening bracket (no member or element yet).
        case separator(opening: UInt8)
        /// A member (`key` is `"name":`) or element (`key` is empty) whose value is a template leaf or the
        /// event time (`values[value]`), left out, with its separator, when the value is null.
        case leaf(key: UnsafeBufferPointer<UInt8>, opening: UInt8, value: Int, checked: Checked)
        /// As `leaf`, for a template whose value is text (`texts[value]`), written as it renders.
        case text(key: UnsafeBufferPointer<UInt8>, opening: UInt8, value: Int, checked: Checked)
    }

    let steps: [Step]
    /// The templates of the `leaf` steps.
    let values: [ValueTemplate]
    /// The templates of the `text` steps.
    let texts: [TextLeaf]
    /// The bytes the steps view.
    private let storage: TrivialStorage
    /// How many leaves have a class in the shape of a payload (`Checked.typeOnly` or `.classified`).
    let checkedLeafCount: Int
    /// The most checked leaves a program takes: their classes (under 32) fill 60 bits of a shape.
    static let maximumCheckedLeaves = 12
    let leafCount: Int

    /// What a leaf gave, enough to make the value tree again without the event.
    enum RenderedLeaf: Sendable {
        /// Null: the member or element is left out.
        case absent
        case value(JSONValue)
        /// Text, as the escaped bytes of the payload in this range (inside the quotes).
        case text(Range<Int>)
    }

    /// The payload rendered as bytes, its shape, and what each leaf gave.
    struct Output: Sendable {
        var bytes: [UInt8]
        /// The classes of the checked leaves in step order, 5 bits each, the first the highest.
        var shape: UInt64
        var leaves: [RenderedLeaf]

        /// The value `ValueTemplate.render(_:)` gave for `payload`, the template the program was made from.
        func value(of payload: ValueTemplate) -> JSONValue {
            var next = 0
            return value(of: payload, next: &next)
        }

        private func value(of template: ValueTemplate, next: inout Int) -> JSONValue {
            if let constant = PayloadProgram.constantValue(template) { return constant }
            switch template {
            case .template, .eventTime:
                let leaf = leaves[next]
                next += 1
                switch leaf {
                case .absent: return .null
                case .value(let value): return value
                case .text(let range):
                    var quoted: [UInt8] = [UInt8(ascii: "\"")]
                    quoted += bytes[range]
                    quoted.append(UInt8(ascii: "\""))
                    return (try? JSONValue(parsing: quoted)) ?? .null
                }
            case .object(let members):
                var object = JSONObject()
                for member in members {
                    let value = value(of: member.value, next: &next)
                    if !value.isNull { object.appendUnchecked(member.key, value) }
                }
                return .object(object)
            case .array(let elements):
                var array: [JSONValue] = []
                for element in elements {
                    let value = value(of: element, next: &next)
                    if !value.isNull { array.append(value) }
                }
                return .array(array)
            case .constant(let value):
                return value
            }
        }
    }

    /// Nil when the payload is not an object (the rules file loader always makes one), or it has more
    /// than `maximumCheckedLeaves` checked leaves.
    init?(_ payload: ValueTemplate) {
        guard case .object = payload else { return nil }
        var compiler = Compiler()
        compiler.compile(payload, place: .root)
        compiler.flush()
        steps = compiler.steps
        values = compiler.values
        texts = compiler.texts
        storage = compiler.storage
        checkedLeafCount = compiler.checkedLeafCount
        leafCount = compiler.leafCount
        guard checkedLeafCount <= Self.maximumCheckedLeaves else { return nil }
    }

    /// The payload's bytes and shape, or nil when a leaf cannot be rendered (the value tree then says
    /// why) or a checked leaf has a value whose class the shape cannot hold.
    func render(_ context: RenderContext) -> Output? {
        var output = Output(bytes: [], shape: 0, leaves: [])
        output.bytes.reserveCapacity(256)
        output.leaves.reserveCapacity(leafCount)
        // By index, where the steps lie: `for step in steps` copied each step, a retain and a release for
        // every array and template in it.
        for index in steps.indices {
            switch steps[index] {
            case .bytes(let chunk):
                output.bytes.append(contentsOf: chunk)
            case .separator(let opening):
                if output.bytes.last != opening { output.bytes.append(UInt8(ascii: ",")) }
            case .leaf(let key, let opening, let template, let checked):
                guard let value = try? values[template].render(context) else { return nil }
                switch checked {
                case .unread: break
                case .typeOnly, .classified:
                    guard let checkedClass = APNsPayload.checkedClass(of: value, typeOnly: checked == .typeOnly)
                    else { return nil }
                    output.shape = output.shape << 5 | UInt64(checkedClass)
                }
                if value.isNull {
                    output.leaves.append(.absent)
                    continue
                }
                output.leaves.append(.value(value))
                if output.bytes.last != opening { output.bytes.append(UInt8(ascii: ",")) }
                output.bytes.append(contentsOf: key)
                JSONWriter.write(value, into: &output.bytes)
            case .text(let key, let opening, let text, let checked):
                let memberStart = output.bytes.count
                if output.bytes.last != opening { output.bytes.append(UInt8(ascii: ",")) }
                output.bytes.append(contentsOf: key)
                let valueStart = output.bytes.count
                switch texts[text].write(context, into: &output.bytes) {
                case .text:
                    let contents = (valueStart + 1)..<(output.bytes.count - 1)
                    output.leaves.append(.text(contents))
                    if checked != .unread {
                        let checkedClass = APNsPayload.checkedClass(ofEscapedText: output.bytes[contents])
                        output.shape = output.shape << 5 | UInt64(checkedClass)
                    }
                case .null:
                    output.bytes.removeSubrange(memberStart...)
                    output.leaves.append(.absent)
                    if checked != .unread { output.shape <<= 5 }
                case .unwritable:
                    return nil
                }
            }
        }
        return output
    }

    /// The value of a subtree without leaves, as `ValueTemplate.render(_:)` gives it (null members and
    /// elements left out); nil when the subtree has a leaf.
    static func constantValue(_ template: ValueTemplate) -> JSONValue? {
        switch template {
        case .constant(let value): return value
        case .template, .eventTime: return nil
        case .object(let members):
            var object = JSONObject()
            for member in members {
                guard let value = constantValue(member.value) else { return nil }
                if !value.isNull { object.appendUnchecked(member.key, value) }
            }
            return .object(object)
        case .array(let elements):
            var array: [JSONValue] = []
            for element in elements {
                guard let value = constantValue(element) else { return nil }
                if !value.isNull { array.append(value) }
            }
            return .array(array)
        }
    }

    private struct Compiler {
        var steps: [Step] = []
        var values: [ValueTemplate] = []
        var texts: [TextLeaf] = []
        let storage = TrivialStorage()
        var chunk: [UInt8] = []
        var checkedLeafCount = 0
        var leafCount = 0

        /// Where a container is, for what the payload checks read of its members.
        enum Place {
            case root, aps, checked, unread
        }

        /// Whether the container being compiled has a member (or element) before the next one, as far as
        /// is known at load: after a leaf that may be null, it is known only when the payload is rendered.
        enum Separation {
            case first, notFirst, unknown
        }

        mutating func flush() {
            if !chunk.isEmpty { steps.append(.bytes(storage.copy(chunk))) }
            chunk = []
        }

        mutating func compile(_ template: ValueTemplate, place: Place) {
            switch template {
            case .object(let members):
                chunk.append(UInt8(ascii: "{"))
                var separation = Separation.first
                var apsSeen = false
                for member in members {
                    var key: [UInt8] = []
                    JSONWriter.writeString(member.key, into: &key)
                    key.append(UInt8(ascii: ":"))
                    let leaf: Checked
                    let nested: Place
                    switch place {
                    case .root:
                        // The checks read the root's first `aps` (JSONObject's subscript) and nothing beside it.
                        if member.key == "aps" && !apsSeen {
                            (leaf, nested) = (.classified, .aps)
                        } else {
                            (leaf, nested) = (.unread, .unread)
                        }
                        if member.key == "aps" { apsSeen = true }
                    case .aps:
                        if APNsPayload.typeCheckedAPSKeys.contains(member.key) {
                            (leaf, nested) = (.typeOnly, .unread)
                        } else {
                            (leaf, nested) = (.classified, .checked)
                        }
                    case .checked: (leaf, nested) = (.classified, .checked)
                    case .unread: (leaf, nested) = (.unread, .unread)
                    }
                    add(
                        member.value, key: key, opening: UInt8(ascii: "{"), separation: &separation, leaf: leaf,
                        nested: nested)
                }
                chunk.append(UInt8(ascii: "}"))
            case .array(let elements):
                chunk.append(UInt8(ascii: "["))
                var separation = Separation.first
                let leaf: Checked = place == .unread ? .unread : .classified
                let nested: Place = place == .unread ? .unread : .checked
                for element in elements {
                    add(
                        element, key: [], opening: UInt8(ascii: "["), separation: &separation, leaf: leaf,
                        nested: nested)
                }
                chunk.append(UInt8(ascii: "]"))
            case .constant(let value):
                JSONWriter.write(value, into: &chunk)
            case .template, .eventTime:
                preconditionFailure("a payload program's root is an object")
            }
        }

        /// One member or element of a container: constant bytes, a leaf step, or a nested container.
        mutating func add(
            _ value: ValueTemplate, key: [UInt8], opening: UInt8, separation: inout Separation, leaf: Checked,
            nested: Place
        ) {
            if let constant = PayloadProgram.constantValue(value) {
                if constant.isNull { return }
                separate(opening: opening, separation: &separation)
                chunk += key
                JSONWriter.write(constant, into: &chunk)
                separation = .notFirst
                return
            }
            switch value {
            case .template, .eventTime:
                flush()
                if case .template(let template, let type, _) = value, let text = TextLeaf(template, type: type) {
                    steps.append(.text(key: storage.copy(key), opening: opening, value: texts.count, checked: leaf))
                    texts.append(text)
                } else {
                    steps.append(.leaf(key: storage.copy(key), opening: opening, value: values.count, checked: leaf))
                    values.append(value)
                }
                if leaf != .unread { checkedLeafCount += 1 }
                leafCount += 1
                if separation == .first { separation = .unknown }
            case .object, .array:
                // A container is never left out, even when empty.
                separate(opening: opening, separation: &separation)
                chunk += key
                compile(value, place: nested)
                separation = .notFirst
            case .constant:
                preconditionFailure("constants are written above")
            }
        }

        mutating func separate(opening: UInt8, separation: inout Separation) {
            switch separation {
            case .first: break
            case .notFirst: chunk.append(UInt8(ascii: ","))
            case .unknown:
                flush()
                steps.append(.separator(opening: opening))
            }
        }
    }
}
