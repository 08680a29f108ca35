// Reads what Apple writes into push certificates: the topics extension (which bundle ids and push
// kinds the certificate may push to) and the environment markers. OpenSSL decodes the DER; what it
// holds is checked here (string types, lengths, how many topics).

import COpenSSL

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
        let (decoded, consumed) = der.withUnsafeBufferPointer { buffer -> (OpaquePointer?, Int) in
            guard let start = buffer.baseAddress else { return (nil, 0) }
            var cursor: UnsafePointer<UInt8>? = start
            let sequence = d2i_ASN1_SEQUENCE_ANY(nil, &cursor, buffer.count)
            return (sequence, cursor.map { $0 - start } ?? 0)
        }
        guard let sequence = decoded else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        defer { OPENSSL_sk_pop_free(sequence) { ASN1_TYPE_free($0?.assumingMemoryBound(to: ASN1_TYPE.self)) } }
        guard consumed == der.count else { return nil }
        let count = Int(OPENSSL_sk_num(sequence))
        var topics: [String] = []
        for index in 0..<count {
            guard let element = OPENSSL_sk_value(sequence, Int32(index))?.assumingMemoryBound(to: ASN1_TYPE.self)
            else { return nil }
            switch ASN1_TYPE_get(element) {
            case V_ASN1_UTF8STRING, V_ASN1_IA5STRING, V_ASN1_PRINTABLESTRING:
                guard topics.count < maximumTopics, let topic = topic(element.pointee.value.asn1_string) else {
                    return nil
                }
                topics.append(topic)
            case V_ASN1_SEQUENCE:
                // The kinds of the preceding topic ("app", "voip", "complication"); they follow from the topic.
                continue
            default:
                return nil
            }
        }
        return topics
    }

    /// A topic's text: 1 to `maximumTopicLength` bytes of UTF-8, no spaces or control characters.
    private static func topic(_ string: UnsafeMutablePointer<ASN1_STRING>?) -> String? {
        guard let string, let data = ASN1_STRING_get0_data(string) else { return nil }
        let length = Int(ASN1_STRING_length(string))
        guard length > 0, length <= maximumTopicLength,
            let topic = String(validating: UnsafeBufferPointer(start: data, count: length), as: UTF8.self),
            topic.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F })
        else { return nil }
        return topic
    }
}
