// A JSON document kept flat: its bytes, and one entry per value in document order that says where the value
// lies in them. Events are parsed this way because the worker reads a few members of each and copies fewer:
// a `JSONValue` tree costs an allocation per object, array and long string (the event's parse made over a
// quarter of the event loops' allocations), and every walk through it retains and releases what it passes
// (figures: docs/performance.md). A tape adds one allocation, its entries, to the bytes it was given, and
// `JSONNode`, its reader, is plain indices and pointers.
//
// The parse is `JSONParser`'s, as strict and with the same errors: the same code reads strings, numbers and
// literals, and the structure is walked the same way.

/// A parsed JSON document as a flat list of entries over its bytes. Read it with `withRoot`.
public struct JSONTape: Sendable {
    /// The document's UTF-8 bytes, as given.
    public let bytes: [UInt8]
    let entries: [Entry]

    /// One value: its kind; for a string (or a member name) the range of its text between the quotes;
    /// for an array or object its count and the index of the entry after its last descendant; for a
    /// number or boolean its value in `bits`.
    struct Entry: Sendable {
        var kind: Kind
        /// A string or name without escapes: its bytes are its UTF-8 text.
        var isPlain = true
        var count: UInt32 = 0
        var start: Int32 = 0
        var end: Int32 = 0
        var bits: UInt64 = 0

        enum Kind: UInt8, Sendable {
            case null, bool, int, double, string, array, object, name
        }
    }

    /// Parses one JSON document, as `JSONValue(parsing:options:)` would with `allowsDuplicateKeys` false: the
    /// same documents are accepted and the same errors thrown. A tape keeps every member it reads, so a name
    /// given twice in one object is always refused (a lookup could not say which one the producer meant).
    public init(parsing bytes: [UInt8], maximumDepth: Int = 128) throws(JSONParseError) {
        guard bytes.count < Int(Int32.max) else {
            throw JSONParseError(message: "a document of 2 GiB or more", offset: 0, line: 1, column: 1)
        }
        var entries: [Entry] = []
        // About one value per eight bytes in events; a guess too small costs a copy or two. Capped: a large
        // record is mostly long texts, and room for one entry per eight of its bytes would be three times its size.
        entries.reserveCapacity(min(bytes.count / 8, 1024) + 4)
        let failure: JSONParseError? = bytes.withUnsafeBufferPointer { buffer in
            // The tree's pending members are not used here; the parser wants somewhere to point.
            withUnsafeTemporaryAllocation(of: JSONObject.Member.self, capacity: 1) { unused in
                var parser = JSONParser(
                    bytes: buffer, maximumDepth: maximumDepth, allowsDuplicateKeys: false,
                    pending: unused.baseAddress!)
                return parser.parseTapeDocument(into: &entries)
            }
        }
        if let failure { throw failure }
        self.bytes = bytes
        self.entries = entries
    }

    /// The tape of `value` (its compact encoding, parsed).
    public init(_ value: JSONValue) {
        // Cannot fail: the writer writes what the parser accepts, with no name twice in an object.
        try! self.init(parsing: value.compactBytes)
    }

    /// The tape of `null`.
    public static let null = JSONTape(.null)

    /// Calls `body` with the document's top-level value. The node and every node read from it are valid
    /// only during the call: they point into the tape.
    public func withRoot<Result>(_ body: (JSONNode) throws -> Result) rethrows -> Result {
        try entries.withUnsafeBufferPointer { entries in
            try bytes.withUnsafeBufferPointer { bytes in
                try body(JSONNode(entries: entries.baseAddress!, bytes: bytes, index: 0))
            }
        }
    }

    /// The document as a value tree.
    public var value: JSONValue { withRoot { $0.value } }
}
