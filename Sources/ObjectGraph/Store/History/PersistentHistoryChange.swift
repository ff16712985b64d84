import Foundation

/// One object's change in a transaction of the persistent history
/// (Core Data: `NSPersistentHistoryChange`, a row of `ACHANGE`).
public struct PersistentHistoryChange: Sendable, Hashable {
    /// What happened to the object (`ZCHANGETYPE`; Core Data's numbering).
    public enum ChangeType: Int64, Sendable, Hashable {
        case insert = 0
        case update = 1
        case delete = 2
    }

    /// The change's number in the store (`ACHANGE.Z_PK`).
    public var changeID: Int64
    /// The object, as an ID of its concrete entity; after a delete the row is gone.
    public var changedObjectID: ObjectID
    public var changeType: ChangeType
    /// For an update, the names of the properties the save changed (from Core
    /// Data's `ZCOLUMNS` bitmask); nil for inserts and deletes, as in Core Data.
    public var updatedProperties: Set<String>?
    /// For a delete, the last values of the entity's attributes marked
    /// ``AttributeDescription/preservesValueInHistoryOnDeletion``, by name;
    /// nil for inserts, updates and entities without such attributes.
    public var tombstone: [String: PropertyValue]?
    /// The number of the transaction the change belongs to.
    public var transactionNumber: Int64

    public init(changeID: Int64, changedObjectID: ObjectID, changeType: ChangeType, updatedProperties: Set<String>? = nil,
                tombstone: [String: PropertyValue]? = nil, transactionNumber: Int64) {
        self.changeID = changeID
        self.changedObjectID = changedObjectID
        self.changeType = changeType
        self.updatedProperties = updatedProperties
        self.tombstone = tombstone
        self.transactionNumber = transactionNumber
    }
}
