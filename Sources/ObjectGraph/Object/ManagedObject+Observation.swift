import Observation

// MARK: - Observation

/// Managed objects are observable: inside `withObservationTracking`, reading
/// a `@Managed` property of an object of an observable context
/// (``ManagedObjectContext/isObservable``) registers that property, and a
/// change of its value calls the tracking's `onChange` — by a setter,
/// ``ManagedObject/setValue(_:forKey:)``, a to-many's members changing,
/// ``ManagedObjectContext/rollback()``, ``ManagedObjectContext/refresh(_:mergeChanges:)``
/// and the merge of another context's save
/// (``ManagedObjectContext/mergeChanges(fromContextDidSave:)``), which is how a
/// stack's main context takes its importers' and other processes' saves.
///
/// Only the properties whose values changed are reported, each once per
/// change; `onChange` runs on the thread that made the change (a main-queue
/// context's: the main thread). See “Observing objects” in the DataStack documentation.
extension ManagedObject: Observable {}

extension ManagedObject {
    /// Whether typed reads register with Observation: the object's context
    /// is observable. Inlined into the `@Managed` getters: two loads and a test.
    @inlinable @inline(__always)
    final var readsAreObserved: Bool {
        guard let context = contextReference else { return false }
        return context._withUnsafeGuaranteedRef { $0.isObservable }
    }

    /// Registers a read of slot `index` with the tracking in progress, if any,
    /// making the object's registrar if it has none.
    ///
    /// The registered key path is the slot's (``ObservedSlotKeyPaths``), not
    /// the typed property's: the same for a typed read, ``value(forKey:)``
    /// and every path that changes the slot, which knows only its index.
    /// Trackings are per object (each object has its own registrar), so a
    /// key path per slot index is exactly as precise as one per property.
    @usableFromInline
    final func noteObservedRead(at index: Int) {
        madeObservationRegistrar.access(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index))
    }

    /// What an observed slot's key path reads; never read by Observation,
    /// which only compares key paths.
    fileprivate subscript(observedSlot index: Int) -> PropertyValue {
        storedSlots.indices.contains(index) ? storedSlots[index] : .null
    }

    /// Tells the object's observers of the slots whose values differ from
    /// `values` (the row it is about to be given, or the snapshot a rollback
    /// returns it to), around `change` — for paths that then turn the object
    /// into a fault, so that its values are not loaded again just to be compared.
    /// Does nothing but `change` for an object nobody observed or not loaded.
    package final func tellingObservers<Result>(ofValuesChangingTo values: ContiguousArray<PropertyValue>,
                                                 _ change: () -> Result) -> Result {
        guard let registrar = observationRegistrar, state == .loaded, storedSlots.count == values.count else {
            return change()
        }
        let changed = values.indices.filter { storedSlots[$0] != values[$0] }
        for index in changed { registrar.willSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index)) }
        let result = change()
        for index in changed { registrar.didSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index)) }
        return result
    }

    /// ``tellingObservers(ofValuesChangingTo:_:)`` for a row read from the
    /// store, whose to-many slots are empty (not loaded) rather than lists: those
    /// are left out of the comparison.
    package final func tellingObservers<Result>(ofRow values: ContiguousArray<PropertyValue>,
                                                 _ change: () -> Result) -> Result {
        guard isObserved, state == .loaded, storedSlots.count == values.count else { return change() }
        var compared = values
        for case let relationship as RelationshipDescription in entity.slotProperties
        where relationship.isToMany && compared[relationship.index].isNull {
            compared[relationship.index] = storedSlots[relationship.index]
        }
        return tellingObservers(ofValuesChangingTo: compared, change)
    }

    /// Tells the object's observers that every slot may have changed: for an
    /// observed object that is a fault when a merge touches it, whose old
    /// values are gone (faults stay faults: it is not loaded to compare), one
    /// whose new row could not be read, and the objects a reset lets go.
    package final func tellObserversAllSlotsMayHaveChanged() {
        guard let registrar = observationRegistrar else { return }
        for index in entity.slotProperties.indices {
            let keyPath = ObservedSlotKeyPaths.keyPath(at: index)
            registrar.willSet(self, keyPath: keyPath)
            registrar.didSet(self, keyPath: keyPath)
        }
    }
}

/// An observed object's registrar, in a class of its own so that the object's
/// box holds a plain reference (see ``ManagedObject/isObserved``).
final class ObjectObservation {
    let registrar = ObservationRegistrar()
}

/// The key paths observers of a slot register with: `\ManagedObject.[observedSlot: i]`.
///
/// Made once for the first slots (a key path with an argument is an object
/// made at run time); two key paths for one index are equal, so a later one
/// made for a larger index works the same.
enum ObservedSlotKeyPaths {
    // Key paths are immutable; KeyPath is not declared Sendable.
    nonisolated(unsafe) private static let made: [KeyPath<ManagedObject, PropertyValue>] =
        (0..<64).map { \ManagedObject.[observedSlot: $0] }

    static func keyPath(at index: Int) -> KeyPath<ManagedObject, PropertyValue> {
        index < made.count ? made[index] : \ManagedObject.[observedSlot: index]
    }
}
