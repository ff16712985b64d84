/// How a context resolves a save whose objects changed in the store since it
/// read them (Core Data: `NSMergePolicy`).
///
/// A conflict is an object this context saves whose row version (`Z_OPT`) in
/// the store is newer than the version the context read.
public enum MergePolicy: Sendable, Equatable {
    /// The save fails with ``ObjectGraphError/Code-swift.struct/mergeConflict``; nothing is written.
    /// The default, as in Core Data (`NSErrorMergePolicy`).
    case error
    /// Property by property, the store's changed values win over the context's
    /// (`NSMergeByPropertyStoreTrumpMergePolicy`).
    case mergeByPropertyStoreTrump
    /// Property by property, the context's changed values win over the store's
    /// (`NSMergeByPropertyObjectTrumpMergePolicy`).
    case mergeByPropertyObjectTrump
    /// The context's objects are written whole, replacing the store's rows (`NSOverwriteMergePolicy`).
    case overwrite
    /// The context's changes to conflicting objects are dropped in favour of the store's rows
    /// (`NSRollbackMergePolicy`).
    case rollback
}
