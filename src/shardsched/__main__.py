from shardsched.cli import main

main()
