import Foundation

extension ManagedObjectModel {
    /// Checks that the classes bound to the model's entities declare what the
    /// entities say: every `@Managed` property of a class (its superclasses'
    /// included) names a property of the entity, of the same kind, a Swift
    /// type that holds the attribute's values, and for a relationship the
    /// same cardinality and a destination whose objects are of the declared class.
    ///
    /// A coordinator calls it when its first store is added, so that a class
    /// that disagrees with a loaded model is an error at setup, not a trap on
    /// the property's first access:
    ///
    /// ```swift
    /// let model = try ManagedObjectModel(contentsOf: modelURL)
    /// model.bindManagedObjectClasses([Company.self])
    /// try model.checkManagedObjectClasses()   // Company.symbol (entity Company): …
    /// ```
    ///
    /// Optionality is checked where it matters: a to-one must be declared
    /// optional (a nil read of a non-optional one has no value to give). An
    /// attribute's Swift optionality may differ from the model's, as with
    /// Core Data's `@NSManaged`: a non-optional property reads nil as its
    /// type's zero (``ManagedAttributeValue/defaultManagedValue``). Integer
    /// widths share a kind, as do `Double` and `Float`, and `Data` and
    /// transformable values.
    ///
    /// - Throws: ``ModelDeclarationError/Code-swift.struct/mismatch`` naming the
    ///   class, the property and the entity.
    public func checkManagedObjectClasses() throws(ModelDeclarationError) {
        let entitiesByName = self.entitiesByName
        for entity in entities where entity.managedObjectClass != ManagedObject.self {
            var type: ManagedObject.Type? = entity.managedObjectClass
            while let current = type {
                let declarations = try ClassDeclarations.of(current)
                for property in declarations.properties {
                    try Self.check(property, of: declarations, against: entity, entitiesByName: entitiesByName)
                }
                type = declarations.superclass
            }
        }
    }

    private static func check(_ property: ClassDeclarations.Property, of declarations: ClassDeclarations,
                              against entity: EntityDescription, entitiesByName: [String: EntityDescription]) throws(ModelDeclarationError) {
        func mismatch(_ message: String) -> ModelDeclarationError {
            ModelDeclarationError(.mismatch, className: declarations.className, propertyName: property.name,
                                  entityName: entity.name, message: message)
        }
        let declaration = property.declaration
        guard let described = entity.propertiesByName[property.name] else {
            throw mismatch("the class declares it @Managed, but entity \(entity.name) has no property named '\(property.name)'")
        }
        var kind = declaration.valueKind
        var isOptional = false
        if case .optional(let wrapped) = kind {
            kind = wrapped
            isOptional = true
        }
        switch kind {
        case .attribute(let type):
            guard let attribute = described as? AttributeDescription else {
                throw mismatch("declared \(declaration.valueTypeName), an attribute; the entity's \(property.name) is a relationship")
            }
            guard storageKind(of: type) == storageKind(of: attribute.type) else {
                throw mismatch("declared \(declaration.valueTypeName) (\(type.rawValue)); the entity's attribute is \(attribute.type.rawValue)")
            }
        case .toOne(let destination), .toMany(let destination, _):
            guard let relationship = described as? RelationshipDescription else {
                throw mismatch("declared \(declaration.valueTypeName), a relationship; the entity's \(property.name) is an attribute")
            }
            var isToMany = false
            if case .toMany = kind { isToMany = true }
            guard relationship.isToMany == isToMany else {
                throw mismatch("declared \(declaration.valueTypeName), a \(isToMany ? "to-many" : "to-one"); the entity's relationship is a \(relationship.isToMany ? "to-many" : "to-one")")
            }
            if !isToMany && !isOptional {
                throw mismatch("a to-one relationship must be declared optional: \(declaration.valueTypeName)?")
            }
            guard let target = entitiesByName[relationship.destinationEntityName] else {
                throw mismatch("the relationship's destination \(relationship.destinationEntityName) is not in the model")
            }
            guard ClassDeclarations.isClass(target.managedObjectClass, kindOf: destination) else {
                throw mismatch("declared to hold \(ClassDeclarations.unqualifiedName(of: destination)); the destination entity \(target.name) makes \(ClassDeclarations.unqualifiedName(of: target.managedObjectClass)) objects (bind the class to it)")
            }
        case .optional, .unsupported:
            throw mismatch("\(declaration.valueTypeName) is no attribute type and no relationship")
        }
    }

    /// Attribute types whose values the same Swift types read and write.
    private static func storageKind(of type: AttributeType) -> Int {
        switch type {
        case .integer16, .integer32, .integer64: 0
        case .double, .float: 1
        case .decimal: 2
        case .boolean: 3
        case .string: 4
        case .date: 5
        case .binaryData, .transformable: 6
        case .uuid: 7
        case .uri: 8
        }
    }
}
