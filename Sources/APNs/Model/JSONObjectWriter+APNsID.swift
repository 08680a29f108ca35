// Writes an apns-id into the project's JSON records without building its text first.

public import JSON

extension JSONObjectWriter {
    /// An apns-id in its canonical lowercase text (`APNsID.string`), written straight from its 16 bytes, or null.
    public mutating func apnsID(_ key: StaticString, _ id: APNsID?) {
        quoted(key, id) { bytes, id in
            let start = bytes.count
            bytes.append(contentsOf: repeatElement(0, count: APNsID.textLength))
            bytes.withUnsafeMutableBufferPointer { id.write(into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
        }
    }

}
