// Reading an X509 certificate's names, dates and extensions into Swift values.

import COpenSSL
import Foundation
import Glibc

enum X509Text {
    /// A name in one line, in order: "UID=com.example.app, CN=Apple Push Services: com.example.app, C=US".
    static func name(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        // RFC 2253 escaping without ESC_MSB, so non-ASCII stays readable UTF-8; entries in certificate order.
        let strings =
            UInt(ASN1_STRFLGS_ESC_2253) | UInt(ASN1_STRFLGS_ESC_CTRL) | UInt(ASN1_STRFLGS_UTF8_CONVERT)
            | UInt(ASN1_STRFLGS_DUMP_UNKNOWN) | UInt(ASN1_STRFLGS_DUMP_DER)
        let flags = strings | UInt(XN_FLAG_SEP_CPLUS_SPC) | UInt(XN_FLAG_FN_SN)
        guard X509_NAME_print_ex(bio, name, 0, flags) >= 0 else { return "" }
        return OpenSSLBIO.string(from: bio)
    }

    /// The first entry of the given NID (e.g. `NID_commonName`, `NID_userId`), as UTF-8.
    static func entry(_ name: OpaquePointer?, nid: Int32) -> String? {
        guard let name else { return nil }
        let index = X509_NAME_get_index_by_NID(name, nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        var output: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&output, data)
        guard length >= 0, let output else { return nil }
        defer { CRYPTO_free(output, #fileID, #line) }
        return String(decoding: UnsafeBufferPointer(start: output, count: Int(length)), as: UTF8.self)
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }

    /// A date as "2031-01-01" (UTC).
    static func day(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
    }

    /// The raw contents (the OCTET STRING's value) of the extension with this OID, if present.
    static func extensionValue(_ certificate: OpaquePointer, oid: String) -> [UInt8]? {
        guard let object = OBJ_txt2obj(oid, 1) else { return nil }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(certificate, object, -1)
        guard index >= 0, let ext = X509_get_ext(certificate, index), let data = X509_EXTENSION_get_data(ext)
        else { return nil }
        let length = Int(ASN1_STRING_length(data))
        guard length >= 0, let bytes = ASN1_STRING_get0_data(data) else { return [] }
        return Array(UnsafeBufferPointer(start: bytes, count: length))
    }

    /// Every `CERTIFICATE` block of a PEM text, in order. The caller owns the results.
    static func readPEMCertificates(_ bytes: [UInt8]) -> [OpaquePointer] {
        var certificates: [OpaquePointer] = []
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
            defer { BIO_free(bio) }
            while let certificate = PEM_read_bio_X509(bio, nil, { _, _, _, _ in 0 }, nil) {
                certificates.append(certificate)
            }
        }
        OpenSSLErrorQueue.clear()  // the read that ends the loop leaves "no start line"
        return certificates
    }

    /// The subject of a DER X.509 certificate, or nil when the bytes are not exactly one.
    static func derCertificateSubject(_ bytes: [UInt8]) -> String? {
        let certificate: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            let parsed = d2i_X509(nil, &cursor, buffer.count)
            // A trailing remainder means this was something else that happened to start like a certificate.
            if let parsed, cursor != buffer.baseAddress.map({ $0 + buffer.count }) {
                X509_free(parsed)
                return nil
            }
            return parsed
        }
        OpenSSLErrorQueue.clear()
        guard let certificate else { return nil }
        defer { X509_free(certificate) }
        return name(X509_get_subject_name(certificate))
    }

    static func isDERCertificate(_ bytes: [UInt8]) -> Bool { derCertificateSubject(bytes) != nil }
}
