// A YAML (or JSON) document as a JSONValue plus where each key was written, for other files the
// worker reads (worker.yaml) so their errors can point at file:line:column too.

import APNs
public import JSON

/// A parsed YAML document whose keys remember their positions.
public struct YAMLDocument: Sendable {
    /// The document, scalars resolved as in rules files (plain scalars to booleans, numbers, null).
    public let value: JSONValue
    private let positions: [String: SourcePosition]

    /// A syntax error with its position.
    public struct SyntaxError: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var position: SourcePosition
        public var description: String { "\(position): \(message)" }
    }

    /// Parses UTF-8 YAML (JSON is YAML too).
    public init(bytes: [UInt8]) throws(SyntaxError) {
        let root: SourceNode
        do {
            root = try YAMLReader.read(bytes)
        } catch {
            throw SyntaxError(message: error.message, position: error.position)
        }
        var positions: [String: SourcePosition] = ["": root.position]
        Self.collect(root, path: "", into: &positions)
        self.value = root.json
        self.positions = positions
    }

    /// Where the key at `path` was written (`kafka.brokers`, `apps.com.example.chat.credential`,
    /// `kafka.brokers[1]`), or the nearest enclosing key's position when `path` is not in the file.
    public func position(of path: String) -> SourcePosition? {
        var candidate = path
        while true {
            if let position = positions[candidate] { return position }
            guard let cut = candidate.lastIndex(where: { $0 == "." || $0 == "[" }) else { return positions[""] }
            candidate = String(candidate[..<cut])
        }
    }

    private static func collect(_ node: SourceNode, path: String, into positions: inout [String: SourcePosition]) {
        switch node.content {
        case .mapping(let entries):
            for entry in entries {
                let childPath = path.isEmpty ? entry.key : path + "." + entry.key
                positions[childPath] = entry.keyPosition
                collect(entry.value, path: childPath, into: &positions)
            }
        case .sequence(let elements):
            for (index, element) in elements.enumerated() {
                let childPath = path + "[\(index)]"
                positions[childPath] = element.position
                collect(element, path: childPath, into: &positions)
            }
        case .scalar:
            break
        }
    }
}
