// The bundle id a client certificate may push to. Apple's push certificates carry it as the
// subject's UID; a certificate without one (a test CA's client certificate) limits nothing.

import COpenSSL

enum ClientCertificateTopics {
    /// The UID entries of the peer certificate's subject; empty without a peer certificate or UID.
    static func read(from ssl: OpaquePointer) -> [String] {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return [] }
        defer { X509_free(certificate) }
        guard let subject = X509_get_subject_name(certificate) else { return [] }
        var topics: [String] = []
        var index: Int32 = -1
        while true {
            index = X509_NAME_get_index_by_NID(subject, NID_userId, index)
            if index < 0 { break }
            guard let entry = X509_NAME_get_entry(subject, index),
                let data = X509_NAME_ENTRY_get_data(entry)
            else { continue }
            var utf8: UnsafeMutablePointer<UInt8>?
            let length = ASN1_STRING_to_UTF8(&utf8, data)
            if length > 0, let utf8 {
                topics.append(String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self))
                CRYPTO_free(utf8, #fileID, #line)
            }
        }
        return topics
    }
}
