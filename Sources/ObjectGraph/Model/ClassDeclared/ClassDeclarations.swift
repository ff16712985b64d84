@_spi(DataStackInternal) import DataStackSupport
import Foundation

/// The `@Managed` declarations of one class, found once per class in the
/// process: a class's declarations are a fact about the class, not a model.
struct ClassDeclarations: @unchecked Sendable {
    // @unchecked Sendable: immutable once made; key paths and values are immutable.

    /// One `@Managed` stored property of the class itself.
    struct Property {
        let name: String
        let declaration: ManagedDeclaration
    }

    let type: ManagedObject.Type
    /// The class's unqualified name.
    let className: String
    /// The superclass, unless it is ``ManagedObject``.
    let superclass: ManagedObject.Type?
    /// The class's own `@Managed` properties, in declaration order.
    let properties: [Property]
    /// What the class declares of its entity (nil: nothing of its own).
    let entity: EntityDeclaration

    /// The class's unqualified name (`Company`, not `MyApp.Company`).
    static func unqualifiedName(of type: AnyClass) -> String {
        // What `String(describing:)` prints for a class, without its search
        // of every protocol conformance in the process for the metatype
        // (~1.1 M instructions the first time: a process's first fetch paid it).
        let name = _typeName(type, qualified: false)
        return name.split(separator: ".").last.map(String.init) ?? name
    }

    /// The managed superclass of `type`, nil when it is ``ManagedObject``'s direct subclass.
    static func managedSuperclass(of type: ManagedObject.Type) -> ManagedObject.Type? {
        guard let parent = _getSuperclass(type) as? ManagedObject.Type, parent != ManagedObject.self else { return nil }
        return parent
    }

    /// What `type` declares of its entity: its ``ManagedObject/entityDeclaration``,
    /// unless that is its superclass's, inherited rather than overridden.
    static func entityDeclaration(of type: ManagedObject.Type) -> EntityDeclaration {
        let declaration = type.entityDeclaration
        if let parent = managedSuperclass(of: type), parent.entityDeclaration == declaration { return EntityDeclaration() }
        return declaration
    }

    /// The entity name `type` makes.
    static func entityName(of type: ManagedObject.Type) -> String {
        entityDeclaration(of: type).name ?? unqualifiedName(of: type)
    }

    private static let cache = Locked<[ObjectIdentifier: ClassDeclarations]>([:])

    /// The declarations of `type`, made from a prototype the first time.
    static func of(_ type: ManagedObject.Type) throws(ModelDeclarationError) -> ClassDeclarations {
        if let known = cache.withLock({ $0[ObjectIdentifier(type)] }) { return known }
        let found = try make(type)
        cache.withLock { $0[ObjectIdentifier(type)] = found }
        return found
    }

    private static func make(_ type: ManagedObject.Type) throws(ModelDeclarationError) -> ClassDeclarations {
        let className = unqualifiedName(of: type)
        // The prototype's entity is a placeholder: the class's initializers
        // run, which is all that is needed; the object is never used.
        let placeholder = EntityDescription(name: className)
        let (prototype, recorded) = ManagedDeclarationRecorder.recording {
            type.init(entity: placeholder, insertInto: nil)
        }
        guard let recorded else {
            throw ModelDeclarationError(.unsupportedType, className: className,
                                        message: "the class and its superclasses declare more than \(ManagedDeclarationRecorder.maximumCount) @Managed properties")
        }
        var properties: [Property] = []
        // The class's own stored properties only: the superclasses make entities of their own.
        for child in Mirror(reflecting: prototype).children {
            guard let storage = child.value as? ManagedDeclarationTagged, let label = child.label else { continue }
            let name = label.hasPrefix("_") ? String(label.dropFirst()) : label
            let tag = Int(storage.declarationTag)
            guard tag >= 1, tag <= recorded.count else {
                // An initializer that recorded nothing: a wrapper made
                // outside a property initializer (assigned in `init`).
                throw ModelDeclarationError(.unsupportedType, className: className, propertyName: name,
                                            message: "the @Managed property's declaration was not recorded; declare it with an initializer expression, not by assigning it in init")
            }
            properties.append(Property(name: name, declaration: recorded[tag - 1]))
        }
        withExtendedLifetime(placeholder) {}
        return ClassDeclarations(type: type, className: className, superclass: managedSuperclass(of: type),
                                 properties: properties, entity: entityDeclaration(of: type))
    }
}

/// A `@Managed` storage, seen through a `Mirror`.
protocol ManagedDeclarationTagged {
    var declarationTag: UInt8 { get }
}

extension ClassDeclarations {
    /// Whether `type` is `ancestor` or one of its subclasses.
    static func isClass(_ type: AnyClass, kindOf ancestor: AnyClass) -> Bool {
        var current: AnyClass? = type
        while let step = current {
            if step == ancestor { return true }
            current = _getSuperclass(step)
        }
        return false
    }
}

extension Managed: ManagedDeclarationTagged {
    var declarationTag: UInt8 { tag }
}
