// Reads what Apple writes into push certificates: the topics extension (which bundle ids and push
// kinds the certificate may push to) and the environment markers. Bounded, defensive DER parsing.

/// Apple's push-certificate extension OIDs and the parser for the topics extension.
enum ApplePushCertificateExtensions {
    /// Development/sandbox APNs environment.
    static let sandboxOID = "1.2.840.113635.100.6.3.1"
    /// Production APNs environment.
    static let productionOID = "1.2.840.113635.100.6.3.2"
    /// The topics the certificate may push to.
    static let topicsOID = "1.2.840.113635.100.6.3.6"

    /// Most topics a certificate may list before we call the extension malformed; Apple lists a handful.
    static let maximumTopics = 256
    static let maximumTopicLength = 255

    /// Parses the topics extension value: `SEQUENCE { UTF8String topic, SEQUENCE { UTF8String kind ... }, ... }`.
    ///
    /// Returns the topics in order, or nil when the value does not have that shape (the caller then
    /// falls back to the subject's UID).
    static func topics(fromExtensionValue der: [UInt8]) -> [String]? {
        var outer = DERReader(der)
        guard let sequence = try? outer.element(tag: 0x30, what: "topics SEQUENCE"), outer.isAtEnd else { return nil }
        var reader = DERReader(sequence)
        var topics: [String] = []
        while !reader.isAtEnd {
            guard let element = try? reader.anyElement(what: "topics entry") else { return nil }
            let (tag, contents) = element
            switch tag {
            case 0x0C, 0x16, 0x13:  // UTF8String, IA5String, PrintableString
                guard !contents.isEmpty, contents.count <= maximumTopicLength,
                    let topic = String(validating: contents, as: UTF8.self),
                    topic.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
                else { return nil }
                guard topics.count < maximumTopics else { return nil }
                topics.append(topic)
            case 0x30:
                // The kinds of the preceding topic ("app", "voip", "complication"); they follow from the topic.
                continue
            default:
                return nil
            }
        }
        return topics
    }
}
