// Writes an apns-id into the project's JSON records without building its text first.

public import JSON

extension JSONObjectWriter {
    /// An apns-id in its canonical lowercase text (`APNsID.string`), written straight from its 16 bytes, or null.
    public mutating func apnsID(_ key: StaticString, _ id: APNsID?) {
        quotedText(key, count: id == nil ? nil : APNsID.textLength) { id?.write(into: $0) }
    }

}
