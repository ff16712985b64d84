import DataStack
import Foundation

/// Turns one push's changes into one byte string and back: what a hub stores
/// and sends, at most about twice the changed values' own size.
///
/// ```swift
/// let codec = SyncCodec(model: model, numbering: ledgerNumbers)
/// let bytes = try codec.encode(chunk, firstSequence: 1201)   // the sequences the hub gives the chunk
/// var learned: [Int64: UUID] = [:]
/// let changes = try codec.decode(bytes, firstSequence: 1201, learned: &learned)
/// ```
///
/// A ``SyncChange`` encoded alone (``SyncChange/encoded()``) repeats in every
/// change what a push shares — the replica's UUID, names, a clock that only
/// ticks — and names each object by a 16-byte UUID: a `Double` update took
/// 70.9 bytes for 8 bytes of value. A chunk writes the shared part once in a
/// header and, for each change, only what differs from the change before:
///
/// - **The model instead of names.** Entities are numbered by their place
///   among the model's entity names, sorted; properties by their place among
///   their entity's property names, sorted. Both ends share the model's
///   version (the hub refuses a replica of another,
///   ``SyncHub/register(replica:modelVersion:)``), so both read the same
///   numbers. A codec refuses (`.notInModel`) a name its model lacks.
/// - **Short object numbers.** An object's *number* is the hub sequence of an
///   insert of its UUID. Every replica pulls the whole log in the hub's order,
///   so every replica can tell a number's object (``SyncObjectNumbering``);
///   the pusher learns its own inserts' numbers from the sequences
///   ``SyncHub/push(_:)`` returns. A change names its object, a to-one
///   destination, a to-many member by number when the encoder knows one (the
///   smallest), as a zigzag delta from the previous number in the chunk, so
///   objects in a row cost a byte each; otherwise by UUID. An insert always
///   carries its UUID, and its number is its own sequence from then on.
/// - **Steps that cost nothing.** A flags byte per change says whether its
///   timestamp, local sequence and base sequence follow the previous change's
///   by the usual step (the clock's next tick; local + 1; the same base).
/// - **Doubles and dates as their 8 bytes**, not a varint of their bit
///   pattern (which took 9 or 10).
///
/// A chunk ends with a CRC-32 of its bytes: a byte damaged anywhere, also
/// inside a value, is reported (`.corruptChange`) instead of read as another
/// value. A decoder never guesses: a number it does not know, an entity or
/// property index beyond the model's, a count beyond the bytes left, throw
/// `.corruptChange` naming what and at which byte.
///
/// ``modelFree`` is the codec of a hub called without one (the ``SyncHub``
/// requirements without a codec): names are written as text, and objects
/// are named by number only within the chunk.
///
/// ## Topics
///
/// ### Making a codec
/// - ``init(model:numbering:)``
/// - ``modelFree``
/// - ``SyncObjectNumbering``
///
/// ### Encoding and decoding
/// - ``encode(_:firstSequence:)``
/// - ``decode(_:firstSequence:learned:)``
public final class SyncCodec: Sendable {
    /// The entity names, sorted: an entity's index is its place here; nil for ``modelFree``.
    let entityNames: [String]?
    let entityIndexes: [String: Int]
    /// Per entity index, its property names (inherited ones included), sorted.
    let propertyNames: [[String]]
    let propertyIndexes: [[String: Int]]
    /// Where objects' numbers are known; nil: by number only within a chunk.
    let numbering: (any SyncObjectNumbering)?

    /// A codec of `model`'s entities and properties, naming objects by the
    /// numbers `numbering` knows (none beyond the chunk when nil).
    public init(model: ManagedObjectModel, numbering: (any SyncObjectNumbering)? = nil) {
        let entities = model.entitiesByName.keys.sorted()
        entityNames = entities
        entityIndexes = Dictionary(uniqueKeysWithValues: entities.enumerated().map { ($1, $0) })
        propertyNames = entities.map { model.entitiesByName[$0].map { $0.propertiesByName.keys.sorted() } ?? [] }
        propertyIndexes = propertyNames.map { Dictionary(uniqueKeysWithValues: $0.enumerated().map { ($1, $0) }) }
        self.numbering = numbering
    }

    private init() {
        entityNames = nil
        entityIndexes = [:]
        propertyNames = []
        propertyIndexes = []
        numbering = nil
    }

    /// A codec without a model: names as text, objects by number only within
    /// a chunk. What a hub uses for calls that bring no codec.
    public static let modelFree = SyncCodec()

    /// Whether names are written as model indexes.
    var usesModel: Bool { entityNames != nil }
}

/// Where a replica knows objects' numbers: the hub sequences of the inserts
/// it pushed and pulled (a sync engine keeps them in its ledger).
///
/// Numbers must be the same on every replica: a number is only ever the hub
/// sequence of an insert of its object, recorded once that sequence is known
/// (from a push's answer or a pull). An object inserted twice has two numbers;
/// either names it, and encoders use the smaller.
public protocol SyncObjectNumbering: Sendable {
    /// The smallest number known for `object`, nil when none is.
    func number(of object: UUID) throws(SyncError) -> Int64?
    /// The object numbered `number`, nil when the number is not known here.
    func object(numbered number: Int64) throws(SyncError) -> UUID?
}
