// Reads a YAML (or JSON, which libyaml also reads) document into a SourceNode tree through libyaml's
// event API, keeping every node's position. Aliases are expanded with a budget so that a
// "billion laughs" document fails cleanly instead of exhausting memory.

import APNs
internal import CYAML
import JSON

/// A syntax error in a rules file, with where it happened.
struct YAMLSyntaxError: Error, Sendable {
    var message: String
    var position: SourcePosition
}

enum YAMLReader {
    /// Nesting deeper than this is rejected; rules files are shallow and the tree is walked recursively.
    static let maximumDepth = 64
    /// Nodes after alias expansion; far above any real rules file.
    static let maximumNodes = 200_000

    static func read(_ bytes: [UInt8]) throws(YAMLSyntaxError) -> SourceNode {
        var builder = TreeBuilder()
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else {
            throw YAMLSyntaxError(
                message: "libyaml could not start (out of memory)", position: .init(line: 1, column: 1))
        }
        defer { yaml_parser_delete(&parser) }
        return try bytes.withUnsafeBufferPointer { buffer throws(YAMLSyntaxError) -> SourceNode in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { throw syntaxError(parser) }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { break }
                try builder.handle(event)
            }
            return try builder.finish()
        }
    }

    private static func syntaxError(_ parser: yaml_parser_t) -> YAMLSyntaxError {
        let problem = parser.problem.map { String(cString: $0) } ?? "invalid YAML"
        var message = problem
        if let context = parser.context.map({ String(cString: $0) }) {
            message = "\(problem) (\(context) that began at line \(parser.context_mark.line + 1))"
        }
        if parser.error == YAML_READER_ERROR {
            message = "\(problem) at byte \(parser.problem_offset); a rules file must be UTF-8 text"
        }
        let mark = parser.problem_mark
        return YAMLSyntaxError(
            message: message, position: SourcePosition(line: mark.line + 1, column: mark.column + 1))
    }
}

/// Turns the event stream into a tree: a stack of open collections, closed by their end events.
private struct TreeBuilder {
    enum Open {
        case sequence(position: SourcePosition, anchor: String?, elements: [SourceNode])
        case mapping(position: SourcePosition, anchor: String?, entries: [SourceEntry], pendingKey: SourceNode?)
    }

    var stack: [Open] = []
    var root: SourceNode?
    var documents = 0
    var anchors: [String: (node: SourceNode, size: Int)] = [:]
    var nodeCount = 0

    mutating func handle(_ event: yaml_event_t) throws(YAMLSyntaxError) {
        let position = SourcePosition(line: event.start_mark.line + 1, column: event.start_mark.column + 1)
        let end = SourcePosition(line: event.end_mark.line + 1, column: event.end_mark.column + 1)
        switch event.type {
        case YAML_DOCUMENT_START_EVENT:
            documents += 1
            if documents > 1 {
                throw YAMLSyntaxError(
                    message: "a rules file holds one YAML document; remove the second '---'", position: position)
            }
        case YAML_SCALAR_EVENT:
            let scalar = event.data.scalar
            let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
            let tag = scalar.tag.map { String(cString: $0) }
            let style: ScalarStyle
            switch scalar.style {
            case YAML_SINGLE_QUOTED_SCALAR_STYLE: style = .singleQuoted
            case YAML_DOUBLE_QUOTED_SCALAR_STYLE: style = .doubleQuoted
            case YAML_LITERAL_SCALAR_STYLE, YAML_FOLDED_SCALAR_STYLE: style = .block
            default: style = .plain
            }
            let value = try resolve(text: text, style: style, tag: tag, position: position)
            let node = SourceNode(
                content: .scalar(text: text, style: style, value: value), position: position, end: end)
            try add(node, anchor: scalar.anchor.map { String(cString: $0) }, size: 1)
        case YAML_SEQUENCE_START_EVENT:
            try open(position: position)
            let anchor = event.data.sequence_start.anchor.map { String(cString: $0) }
            stack.append(.sequence(position: position, anchor: anchor, elements: []))
        case YAML_MAPPING_START_EVENT:
            try open(position: position)
            let anchor = event.data.mapping_start.anchor.map { String(cString: $0) }
            stack.append(.mapping(position: position, anchor: anchor, entries: [], pendingKey: nil))
        case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
            guard let top = stack.popLast() else { return }
            switch top {
            case .sequence(let start, let anchor, let elements):
                try add(
                    SourceNode(content: .sequence(elements), position: start, end: end), anchor: anchor,
                    size: 1 + elements.count)
            case .mapping(let start, let anchor, let entries, _):
                try add(
                    SourceNode(content: .mapping(entries), position: start, end: end), anchor: anchor,
                    size: 1 + entries.count)
            }
        case YAML_ALIAS_EVENT:
            let name = String(cString: event.data.alias.anchor)
            guard let anchored = anchors[name] else {
                throw YAMLSyntaxError(
                    message: "unknown alias *\(name); define &\(name) before using it", position: position)
            }
            var node = anchored.node
            node.position = position
            try add(node, anchor: nil, size: anchored.size)
        default:
            break
        }
    }

    mutating func open(position: SourcePosition) throws(YAMLSyntaxError) {
        if stack.count >= YAMLReader.maximumDepth {
            throw YAMLSyntaxError(message: "nesting deeper than \(YAMLReader.maximumDepth) levels", position: position)
        }
    }

    func resolve(text: String, style: ScalarStyle, tag: String?, position: SourcePosition) throws(YAMLSyntaxError)
        -> JSONValue
    {
        switch tag {
        case nil, "!":
            return style == .plain && tag == nil ? ScalarResolution.resolvePlain(text) : .string(text)
        case "tag:yaml.org,2002:str":
            return .string(text)
        case "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null":
            let value = ScalarResolution.resolvePlain(text)
            let expected = tag!.split(separator: ":").last.map(String.init) ?? ""
            let matches: Bool
            switch (expected, value) {
            case ("int", .int), ("float", .double), ("float", .int), ("bool", .bool), ("null", .null): matches = true
            default: matches = false
            }
            guard matches else {
                throw YAMLSyntaxError(message: "'\(text)' is not a valid !!\(expected)", position: position)
            }
            if expected == "float", let double = value.doubleValue { return .double(double) }
            return value
        default:
            throw YAMLSyntaxError(
                message: "unsupported tag \(tag!); rules files use plain YAML "
                    + "(only !!str, !!int, !!float, !!bool, !!null)",
                position: position)
        }
    }

    mutating func add(_ node: SourceNode, anchor: String?, size: Int) throws(YAMLSyntaxError) {
        nodeCount += size
        if nodeCount > YAMLReader.maximumNodes {
            throw YAMLSyntaxError(
                message: "the document expands to more than \(YAMLReader.maximumNodes) nodes (aliases?)",
                position: node.position)
        }
        if let anchor { anchors[anchor] = (node, nodeSize(node)) }
        guard var top = stack.popLast() else {
            root = node
            return
        }
        switch top {
        case .sequence(let position, let anchorName, var elements):
            elements.append(node)
            top = .sequence(position: position, anchor: anchorName, elements: elements)
        case .mapping(let position, let anchorName, var entries, let pendingKey):
            if let key = pendingKey {
                guard case .scalar(let keyText, _, _) = key.content else {
                    throw YAMLSyntaxError(
                        message: "a mapping key must be a plain name, not a list or mapping",
                        position: key.position)
                }
                if keyText == "<<" {
                    throw YAMLSyntaxError(
                        message: "merge keys (<<) are not supported; put shared fields under 'defaults'",
                        position: key.position)
                }
                if let earlier = entries.first(where: { $0.key == keyText }) {
                    throw YAMLSyntaxError(
                        message: "duplicate key '\(keyText)' (first at line \(earlier.keyPosition.line))",
                        position: key.position)
                }
                entries.append(SourceEntry(key: keyText, keyPosition: key.position, value: node))
                top = .mapping(position: position, anchor: anchorName, entries: entries, pendingKey: nil)
            } else {
                top = .mapping(position: position, anchor: anchorName, entries: entries, pendingKey: node)
            }
        }
        stack.append(top)
    }

    func nodeSize(_ node: SourceNode) -> Int {
        switch node.content {
        case .scalar: return 1
        case .sequence(let elements): return 1 + elements.reduce(0) { $0 + nodeSize($1) }
        case .mapping(let entries): return 1 + entries.reduce(0) { $0 + nodeSize($1.value) }
        }
    }

    func finish() throws(YAMLSyntaxError) -> SourceNode {
        guard let root else {
            throw YAMLSyntaxError(
                message: "the file is empty; a rules file starts with 'version: 1'",
                position: .init(line: 1, column: 1))
        }
        return root
    }
}
