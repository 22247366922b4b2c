from .cli.root import main

main()
