// The `apns-unique-id` header of a sandbox answer: kept as its 16 bytes when it is a UUID in canonical
// lowercase text, as APNs sends it, so that a sandbox push's answer makes no string. As a `String` it was
// one heap allocation per notification (36 bytes do not fit in a string's inline form), made on the event
// loop and freed when the outcome was written (docs/performance.md, 2026-12-07, tenth session).

public import JSON
import Platform

/// The id a sandbox answer gives a push, for looking it up in Apple's delivery log.
public struct APNsUniqueID: Sendable, Hashable, CustomStringConvertible {
    private enum Form: Sendable, Hashable {
        /// A UUID whose text is exactly `APNsID.string`'s.
        case uuid(APNsID)
        /// Anything else, kept as it came.
        case text(String)
    }
    private let form: Form

    /// The id as the header's text.
    public init(_ text: String) {
        self = text.withUTF8Bytes { Self(bytes: $0) }
    }

    /// The id as the header's bytes.
    init(bytes: UnsafeBufferPointer<UInt8>) {
        if let id = APNsID.parse(bytes: bytes), Self.isCanonicalText(bytes, of: id) {
            form = .uuid(id)
        } else {
            form = .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    /// The header's text.
    public var description: String {
        switch form {
        case .uuid(let id): return id.string
        case .text(let text): return text
        }
    }

    /// Whether `bytes` are `id`'s canonical text, so that the id gives back exactly the header's text.
    private static func isCanonicalText(_ bytes: UnsafeBufferPointer<UInt8>, of id: APNsID) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: APNsID.textLength) { canonical in
            id.write(into: canonical)
            return bytes.elementsEqual(canonical)
        }
    }

    fileprivate func write(_ key: StaticString, into writer: inout JSONObjectWriter) {
        switch form {
        case .uuid(let id): writer.apnsID(key, id)
        case .text(let text): writer.string(key, text)
        }
    }
}

extension JSONObjectWriter {
    /// An apns-unique-id as the header's text, written from its 16 bytes when it is a UUID; or null.
    public mutating func apnsUniqueID(_ key: StaticString, _ id: APNsUniqueID?) {
        guard let id else { return string(key, nil) }
        id.write(key, into: &self)
    }
}
