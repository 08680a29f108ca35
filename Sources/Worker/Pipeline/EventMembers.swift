// An event's top-level members in one pass over the object: the schema checks them and the decoder reads
// them from here. Looking each up by name scanned the members again for every name (nine lookups by the
// schema, four more by the decoder, on every event: docs/performance.md, 2026-12-07, eleventh session).

import APNs
import JSON

/// The members of an event object that the input schema names, each the value where it lies in the tape.
struct EventMembers {
    var id: JSONNode?
    var type: JSONNode?
    var occurredAt: JSONNode?
    var app: JSONNode?
    var recipient: JSONNode?
    var devices: JSONNode?
    var channels: JSONNode?
    var data: JSONNode?
    var apns: JSONNode?
    /// `occurred_at` as seconds since 1970, once the schema has parsed it (a valid timestamp); nil before,
    /// or when the event has none.
    var occurredAtSeconds: Double?

    /// The members of `event` (an object; none for anything else). A member name is matched by its bytes:
    /// the parser has refused names given twice, and no other spelling of these ASCII names (escapes aside,
    /// which the node resolves) is one name with them, as `JSONNode`'s names compare.
    init(of event: JSONNode) {
        event.forEachMember { name, value in
            name.withUTF8 { bytes in
                switch bytes.count {
                case 2 where ASCIIBytes.equal(bytes, "id"): id = value
                case 3 where ASCIIBytes.equal(bytes, "app"): app = value
                case 4 where ASCIIBytes.equal(bytes, "type"): type = value
                case 4 where ASCIIBytes.equal(bytes, "data"): data = value
                case 4 where ASCIIBytes.equal(bytes, "apns"): apns = value
                case 7 where ASCIIBytes.equal(bytes, "devices"): devices = value
                case 8 where ASCIIBytes.equal(bytes, "channels"): channels = value
                case 9 where ASCIIBytes.equal(bytes, "recipient"): recipient = value
                case 11 where ASCIIBytes.equal(bytes, "occurred_at"): occurredAt = value
                default: break
                }
            }
            return true
        }
    }

}
