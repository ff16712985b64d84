import Foundation

// MARK: - Key-value access

extension ManagedObject {
    /// The value of a property (Core Data's key-value coding).
    ///
    /// Attributes come back as Swift values (see ``PropertyValue``), a to-one
    /// relationship as `ManagedObject?`, a to-many as `Set<ManagedObject>`, an
    /// ordered to-many as `[ManagedObject]`. Fires the fault if needed.
    ///
    /// A transformable attribute with Core Data's default or secure keyed-archive
    /// transformer (``AttributeDescription/archivesValues``) gives the unarchived
    /// Foundation value (`[String]`, `[String: Any]`, `Date`, `URL`, …); stored
    /// bytes that are not a keyed archive come back as `Data`. Other
    /// transformable attributes give their stored bytes as `Data`.
    ///
    /// In an observable context, a read inside `withObservationTracking`
    /// registers the property, as a typed read does.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey`` for a key the entity
    ///   lacks; ``FaultFulfillmentError`` when the object's values, or the
    ///   to-many's members, cannot be read from the store (an external binary
    ///   data file that is missing, too); ``TransformedValueError`` when a keyed
    ///   archive stored for a transformable attribute cannot be unarchived.
    public func value(forKey key: String) throws -> Any? {
        let property = try entity.property(forKey: key)
        try loadValues()
        if readsAreObserved { noteObservedRead(at: property.index) }
        return try anyValue(slots[property.index], for: property)
    }

    /// Sets the value of a property, keeping a relationship's inverse in step.
    ///
    /// A transformable attribute with a keyed-archive transformer stores a
    /// Foundation value (`String`, numbers, `Date`, `UUID`, `URL`, `NSNull`, and
    /// arrays, dictionaries and sets of them) as the `NSKeyedArchiver` archive
    /// Core Data writes; `Data` is stored as given, and any other `Encodable`
    /// value with ``TransformableCoding``.
    ///
    /// - Throws: ``ObjectGraphError/Code-swift.struct/unknownKey``,
    ///   ``ObjectGraphError/Code-swift.struct/wrongValueType``,
    ///   ``ObjectGraphError/Code-swift.struct/valueOutOfRange``, or
    ///   ``ObjectGraphError/Code-swift.struct/differentContexts``, or
    ///   ``FaultFulfillmentError`` when values it needs cannot be read. The
    ///   object is unchanged when it throws.
    public func setValue(_ value: Any?, forKey key: String) throws {
        try write(value, forKey: key) { relationship in
            try setRelationship(relationship, toObjects: objects(from: value, for: relationship))
        }
    }

    /// The stored value of a property, without side effects beyond firing the fault.
    public func primitiveValue(forKey key: String) throws -> Any? {
        try value(forKey: key)
    }

    /// The stored value of a property as the store holds it: the typed form
    /// of ``primitiveValue(forKey:)``, for code that handles every entity alike
    /// without the Swift types a model's classes use (an exporter, a dump, a
    /// sync engine comparing values).
    ///
    /// An attribute gives its ``PropertyValue`` as saved: an integer of any
    /// width as ``PropertyValue/integer(_:)``, a transformable attribute as its
    /// stored bytes (``PropertyValue/data(_:)``), nil as ``PropertyValue/null``.
    /// A to-one gives ``PropertyValue/object(_:)`` or ``PropertyValue/null``, a
    /// to-many ``PropertyValue/objects(_:)`` (see ``objectIDs(forRelationshipNamed:)``).
    /// Fires the fault if needed.
    ///
    /// - Throws: ``ObjectGraphError/unknownKey(_:entity:)`` for a key the entity
    ///   lacks; ``FaultFulfillmentError`` when the object's values, or the
    ///   to-many's members, cannot be read from the store.
    public func primitivePropertyValue(forKey key: String) throws -> PropertyValue {
        let property = try entity.property(forKey: key)
        if let relationship = property as? RelationshipDescription {
            let ids = try objectIDs(for: relationship)
            return relationship.isToMany ? .objects(ids) : ids.first.map(PropertyValue.object) ?? .null
        }
        try loadValues()
        return slots[property.index]
    }

    /// Sets the stored value of a property without maintaining the inverse
    /// relationship. The change is still tracked and saved.
    public func setPrimitiveValue(_ value: Any?, forKey key: String) throws {
        try write(value, forKey: key) { relationship in
            let ids = try objects(from: value, for: relationship).map(\.objectID)
            let slot: PropertyValue = relationship.isToMany ? .objects(ids) : ids.first.map(PropertyValue.object) ?? .null
            writeSlot(slot, at: relationship.index)
        }
    }

    /// Writes `value` to the attribute at `key`, or hands the relationship
    /// there to `writeRelationship`: the two setters differ only in that.
    private func write(_ value: Any?, forKey key: String,
                       relationship writeRelationship: (RelationshipDescription) throws -> Void) throws {
        let property = try entity.property(forKey: key)
        try loadValues()
        switch property {
        case let attribute as AttributeDescription:
            writeSlot(try slotValue(from: value, for: attribute), at: attribute.index)
        case let relationship as RelationshipDescription:
            try writeRelationship(relationship)
        default:
            throw ObjectGraphError.unknownKey(key, entity: entity.name)
        }
    }

    /// The slot value for a Swift value given for an attribute.
    private func slotValue(from value: Any?, for attribute: AttributeDescription) throws(ObjectGraphError) -> PropertyValue {
        guard let value else { return .null }
        return try PropertyValue(value, for: attribute, entity: entity.name)
    }

    // MARK: - Slots

    /// The value in a slot, after firing the fault.
    ///
    /// For the paths that cannot throw: if the fault cannot be loaded, this
    /// access reads the property's initial value, and nothing is stored (see
    /// ``FaultFulfillmentError``). Throwing paths call ``loadValues()`` first.
    ///
    /// Inlined into the `@Managed` getters: a loaded object's read is a load
    /// from its values, with no call.
    @inlinable @inline(__always)
    package final func slotValue(at index: Int) -> PropertyValue {
        #if DEBUG
        assertOnContextQueue()
        #endif
        if state != .loaded { return slotValueOfFault(at: index) }
        return storedSlots[index]
    }

    @usableFromInline package final func slotValueOfFault(at index: Int) -> PropertyValue {
        fireFault()
        if state != .loaded { return Self.initialValue(of: entity.slotProperties[index]) }
        return slots[index]
    }

    /// Writes a slot and tells the context the object changed.
    ///
    /// A fault that cannot be loaded cannot take the change: it is dropped,
    /// and the context keeps the failure until the object is refreshed (see
    /// ``FaultFulfillmentError/changeWasDropped``), so no save goes ahead
    /// without it. Throwing paths call ``loadValues()`` first and never get here.
    @usableFromInline package func writeSlot(_ value: consuming PropertyValue, at index: Int) {
        assertOnContextQueue()
        if state != .loaded {
            do {
                try loadValues()
            } catch {
                managedObjectContext?.noteReadFailure(of: objectID, error, dropsChange: true)
                return
            }
        }
        replaceSlot(value, at: index)
        noteSlotChanged()
    }

    /// Tells the context the object changed, after a write to a loaded slot.
    package func noteSlotChanged() {
        // Inserted and deleted objects are already tracked: spare the weak load.
        if flags.isDisjoint(with: [.inserted, .deleted]) { managedObjectContext?.objectDidChange(self) }
    }

    @usableFromInline
    package func assertOnContextQueue(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if let context = managedObjectContext {
            context.assertOnQueue(file: file, line: line)
        }
        #endif
    }

    /// The Swift value for a slot value of `property`.
    ///
    /// - Throws: ``FaultFulfillmentError`` when an unloaded to-many cannot be read.
    package func anyValue(_ value: PropertyValue, for property: PropertyDescription) throws -> Any? {
        switch property {
        case let attribute as AttributeDescription:
            if attribute.archivesValues, case .data(let bytes) = value {
                return try attribute.transformedValue(from: bytes, of: objectID)
            }
            return value.anyValue(for: attribute.type)
        case let relationship as RelationshipDescription:
            let objects = try relatedObjects(value, for: relationship)
            if !relationship.isToMany { return objects.first }
            return relationship.isOrdered ? objects as Any : Set(objects) as Any
        default:
            return nil
        }
    }

    private func objects(from value: Any?, for relationship: RelationshipDescription) throws -> [ManagedObject] {
        func wrongType() -> ObjectGraphError {
            let expected = relationship.isToMany
                ? (relationship.isOrdered ? "[ManagedObject]" : "Set<ManagedObject>")
                : "a ManagedObject or nil"
            return .wrongValueType(key: relationship.name, entity: entity.name, expected: expected,
                                   actual: value.map { "\(type(of: $0))" } ?? "nil")
        }
        let objects: [ManagedObject]
        switch value {
        case nil, is NSNull:
            objects = []
        case let object as ManagedObject where !relationship.isToMany:
            objects = [object]
        case let set as Set<ManagedObject> where relationship.isToMany:
            objects = Array(set)
        case let array as [ManagedObject] where relationship.isToMany:
            objects = array
        default:
            throw wrongType()
        }
        if relationship.isToMany && value == nil { throw wrongType() }
        // The context first: an object of another context may have its entity
        // from another copy of the model, which would read as "takes objects of
        // entity Company, not an object of entity Company".
        try checkSameContext(objects, for: relationship)
        for object in objects {
            if let destination = relationship.destinationEntity, !object.entity.isKind(of: destination) {
                throw ObjectGraphError.wrongValueType(key: relationship.name, entity: entity.name,
                                                      expected: "objects of entity \(destination.name)",
                                                      actual: "an object of entity \(object.entity.name)")
            }
        }
        return objects
    }
}

// MARK: - Identity

extension ManagedObject: Hashable {
    /// Objects are equal only to themselves, as in Core Data.
    public static func == (lhs: ManagedObject, rhs: ManagedObject) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
