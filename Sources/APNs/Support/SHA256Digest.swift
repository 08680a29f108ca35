// SHA-256 through OpenSSL, for modules that must not reach OpenSSL themselves: the worker writes
// the digest of a record too large to copy whole into its dead letter.

import COpenSSL

public enum SHA256Digest {
    /// The 32-byte digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        let succeeded = bytes.withUnsafeBytes { input in
            digest.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest fails only when OpenSSL cannot allocate or has no SHA-256 at all.
        precondition(succeeded == 1 && length == UInt32(SHA256_DIGEST_LENGTH), "OpenSSL's SHA-256 failed")
        return digest
    }

    /// The digest of `bytes` as 64 lowercase hexadecimal digits, as `sha256sum` prints it.
    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest(bytes) {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
